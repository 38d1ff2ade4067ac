"""Which substrate runs ``studio execute``: ``STUDIO_EXECUTOR`` and the ``STUDIO_KUBE_*`` settings.

* ``local`` (the default): :class:`~services.executors.local.LocalSubstrate`, a child process of
  the worker's pool process with an allowlisted environment;
* ``kubernetes``: :class:`~services.executors.kubernetes.KubernetesSubstrate`, one Job per
  execution, built from :func:`job_settings` (the Helm chart hands every one of those settings to
  the worker through its ConfigMap, so the Job agrees with the chart: same image, service
  account, Secret and pull secrets).

The Kubernetes client's configuration: ``STUDIO_KUBECONFIG`` when set; otherwise the in-cluster
configuration when running in a pod (the worker's service-account token), else the client's
default kubeconfig (``KUBECONFIG`` or ``~/.kube/config``). The namespace: ``STUDIO_KUBE_NAMESPACE``,
else the pod's own namespace, else ``default``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException
from pydantic import SecretStr

from services.db.execution_logins import ExecutionLogins
from services.db.integrations import IntegrationRepository
from services.db.session import resolve_url
from services.execution.errors import ConfigError
from services.executors.base import Substrate
from services.executors.cloud_env import pod_auth
from services.executors.kubernetes import KubernetesSubstrate
from services.executors.local import LocalSubstrate, executor_environment
from services.executors.pod_manifest import DEFAULT_SECRET_ENV, JobSettings
from services.settings import (
    TELEMETRY_VARIABLES,
    TRACE_CONTEXT_VARIABLES,
    ExecutorKind,
    StudioSettings,
)

# Where a pod finds the namespace it runs in (mounted with its service-account token).
IN_CLUSTER_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# The worker's non-secret settings that ``studio execute`` needs as well: handed on as plain
# values in the Job (secrets travel only by secretKeyRef).
FORWARDED_SETTINGS: tuple[str, ...] = (
    "env", "log_level", "github_api_url", "github_git_origins", "repo_allowed_hosts",
    "git_author_name", "git_author_email", "model_prices", "claude_auth", "gemini_auth",
    "codex_auth")
# the setup phase runs in the executor's process (services.runs.setup_phase), and so does the
# approval gate of its tool calls (services.runs.approvals)
FORWARDED_SETTINGS += ("setup_allowlist", "setup_timeout_s", "approval_timeout_s")
GITHUB_TOKEN_VARIABLE = "STUDIO_GITHUB_TOKEN"


def forwarded_environment(settings: StudioSettings) -> dict[str, str]:
    plain: dict[str, str] = {}
    for name in FORWARDED_SETTINGS:
        value = getattr(settings, name)
        if isinstance(value, dict):  # a JSON setting (STUDIO_MODEL_PRICES); empty: not set
            if value:
                plain[f"STUDIO_{name.upper()}"] = json.dumps(value, separators=(",", ":"))
            continue
        text = ",".join(value) if isinstance(value, list) else str(value)
        if text or _empties_a_default(name):
            plain[f"STUDIO_{name.upper()}"] = text
    return plain


def _empties_a_default(name: str) -> bool:
    """Whether an empty value of setting ``name`` differs from its default: an empty
    ``STUDIO_SETUP_ALLOWLIST`` (no host) must reach the pod as such, not fall back to the
    default hosts there."""
    return bool(StudioSettings.model_fields[name].get_default(call_default_factory=True))


def trace_environment(environment: Mapping[str, str]) -> dict[str, str]:
    """What a Job's pod needs to export its spans into the worker's trace: the OTLP endpoint and
    the other telemetry variables, ``TRACEPARENT`` (never the OTLP headers, nor the worker's
    metrics directory, which a pod cannot reach)."""
    names = (set(TELEMETRY_VARIABLES) | set(TRACE_CONTEXT_VARIABLES)) - {"PROMETHEUS_MULTIPROC_DIR"}
    return {name: value for name, value in environment.items() if name in names}


def job_settings(settings: StudioSettings, *, github_token: bool = True,
                 environment: Mapping[str, str] | None = None) -> JobSettings:
    """The executor Job's knobs, from ``STUDIO_KUBE_*``.

    ``github_token=False`` leaves ``STUDIO_GITHUB_TOKEN`` out of the pod: an execution whose
    repository is not on one of the GitHub integration's git origins never gets the token.
    """
    auth = pod_auth(settings, environment or {})
    secret_env = tuple(secret for secret in DEFAULT_SECRET_ENV
                       if secret.name.startswith("STUDIO_")
                       and (github_token or secret.name != GITHUB_TOKEN_VARIABLE))
    return JobSettings(
        secret_env=(*secret_env, *auth.secret_env),
        secret_files=auth.secret_files,
        web_identity=auth.web_identity,
        extra_env={**forwarded_environment(settings), **trace_environment(environment or {}),
                   **auth.plain},
        service_account_name=settings.kube_service_account,
        secret_name=settings.kube_secret_name,
        sandbox_mode=settings.kube_sandbox.value,
        active_deadline_seconds=settings.kube_active_deadline_seconds,
        ttl_seconds_after_finished=settings.kube_ttl_seconds_after_finished,
        cpu_request=settings.kube_cpu_request,
        cpu_limit=settings.kube_cpu_limit,
        memory_request=settings.kube_memory_request,
        memory_limit=settings.kube_memory_limit,
        image_pull_policy=settings.kube_image_pull_policy,
        image_pull_secrets=tuple(settings.kube_image_pull_secrets),
        node_selector=dict(settings.kube_node_selector),
        tolerations=tuple(settings.kube_tolerations),
        login_secret=settings.kube_execution_logins,
    )


def kube_namespace(settings: StudioSettings) -> str:
    if settings.kube_namespace:
        return settings.kube_namespace
    try:
        return IN_CLUSTER_NAMESPACE_FILE.read_text().strip() or "default"
    except OSError:
        return "default"


def kube_api_client(settings: StudioSettings) -> client.ApiClient:
    """An API client: the configured kubeconfig, in-cluster, or the default kubeconfig."""
    configuration = client.Configuration()
    try:
        if settings.kubeconfig is not None:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=str(settings.kubeconfig), client_configuration=configuration
            )
        else:
            try:
                config.load_incluster_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
            except ConfigException:
                config.load_kube_config(  # type: ignore[no-untyped-call]
                    client_configuration=configuration
                )
    except (ConfigException, OSError) as exc:
        raise ConfigError(
            f"STUDIO_EXECUTOR=kubernetes: no Kubernetes configuration ({exc}); run in a pod "
            "with a service account, or set STUDIO_KUBECONFIG"
        ) from exc
    return client.ApiClient(configuration)


def kubernetes_substrate(settings: StudioSettings, *, github_token: bool = True,
                         environment: Mapping[str, str] | None = None,
                         handed: Mapping[str, SecretStr] | None = None) -> KubernetesSubstrate:
    """The substrate; with ``kube_execution_logins``, each Job gets its own database login and
    ``handed`` (secrets its worker decrypted for it) in its login Secret."""
    api = kube_api_client(settings)
    logins, secrets = None, dict(handed or {})
    job = job_settings(settings, github_token=github_token, environment=environment)
    if settings.kube_execution_logins:
        logins = ExecutionLogins.for_url(resolve_url(settings))
        # the pod cannot decrypt the stored token (no STUDIO_SECRET_KEY, no read of the
        # column): the worker hands it the token it resolved, when the execution may have it
        token = IntegrationRepository(logins.db, settings).github().token if github_token \
            else None
        if token is not None:
            secrets[GITHUB_TOKEN_VARIABLE] = token
        job = replace(job, login_secret_keys=tuple(sorted(secrets)))
    else:
        secrets = {}  # nothing is handed without a login Secret to carry it
    return KubernetesSubstrate(
        client.BatchV1Api(api),
        kube_namespace(settings),
        settings.kube_image or "",
        job,
        core_api=client.CoreV1Api(api),
        logins=logins,
        handed=secrets,
    )


def build_substrate(settings: StudioSettings, environment: Mapping[str, str], *,
                    github_token: bool = True,
                    handed: Mapping[str, SecretStr] | None = None) -> Substrate:
    """The substrate ``STUDIO_EXECUTOR`` names (``environment``: what a local child inherits;
    ``github_token``: whether a Kubernetes pod gets the GitHub token)."""
    if settings.executor is ExecutorKind.KUBERNETES:
        return kubernetes_substrate(settings, github_token=github_token,
                                    environment=environment, handed=handed)
    return LocalSubstrate(env=executor_environment(environment))
