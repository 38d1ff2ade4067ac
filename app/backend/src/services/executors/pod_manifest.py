"""The Kubernetes Job of one execution: a pure function of the execution id and the settings.

:func:`build_job` builds a ``batch/v1`` Job with the official client's models and talks to no
API server (submitting, watching and deleting it is :mod:`services.executors.kubernetes`). The
Job runs ``studio execute <execution_id>`` once (``backoffLimit: 0``; a retry is the dispatcher's
decision, made with a lease, not Kubernetes'), as a non-root user on a read-only root filesystem,
with ``emptyDir`` volumes for the workspace, ``/tmp`` and the home directory, resource limits, a
deadline and a TTL. Secrets reach the container only as ``valueFrom.secretKeyRef``: the manifest
never holds a secret value, so it can be logged, stored and diffed.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client
from pydantic import SecretStr

EXECUTOR_NAME = "studio-executor"
EXECUTION_ID_LABEL = "studio.dev/execution-id"
CONTAINER_NAME = "executor"
JOB_NAME_PREFIX = "studio-exec-"
SHORT_ID_LENGTH = 12
WORKSPACE_DIR = "/workspace"
HOME_DIR = "/home/studio"
TMP_DIR = "/tmp"

# A label value: at most 63 characters, alphanumerics at both ends.
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
# Names that carry credentials: they may come from a Secret, never as a literal value.
_SECRET_NAME_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "CREDENTIAL", "DATABASE_URL")


@dataclass(frozen=True)
class SecretEnv:
    """One environment variable read from the executor Secret (``key`` defaults to ``name``)."""

    name: str
    optional: bool = False
    key: str | None = None


DATABASE_URL = "STUDIO_DATABASE_URL"
# What a pod with its own login never gets: the deployment's database URL and the key that
# decrypts every stored secret.
MASTER_SECRETS = frozenset({DATABASE_URL, "STUDIO_SECRET_KEY"})

DEFAULT_SECRET_ENV: tuple[SecretEnv, ...] = (
    SecretEnv("STUDIO_DATABASE_URL"),
    SecretEnv("STUDIO_SECRET_KEY"),
    SecretEnv("STUDIO_GITHUB_TOKEN"),
    SecretEnv("OPENAI_API_KEY", optional=True),
    SecretEnv("GEMINI_API_KEY", optional=True),
    SecretEnv("ANTHROPIC_API_KEY", optional=True),
)


@dataclass(frozen=True)
class SecretFile:
    """A key of the executor Secret mounted as a read-only file, its path in ``env`` (the Google
    application default credentials of a Vertex AI mode)."""

    env: str
    key: str
    mount_dir: str
    file_name: str

    @property
    def path(self) -> str:
        return f"{self.mount_dir}/{self.file_name}"


# Where IRSA puts the token; the AWS SDKs read the path from AWS_WEB_IDENTITY_TOKEN_FILE.
WEB_IDENTITY_TOKEN_DIR = "/var/run/secrets/eks.amazonaws.com/serviceaccount"
WEB_IDENTITY_TOKEN_PATH = f"{WEB_IDENTITY_TOKEN_DIR}/token"


@dataclass(frozen=True)
class WebIdentityToken:
    """A projected service-account token for AWS STS ``AssumeRoleWithWebIdentity``."""

    audience: str = "sts.amazonaws.com"
    expiration_seconds: int = 86400


@dataclass(frozen=True)
class JobSettings:
    """Deployment knobs of the executor Job (the Helm chart's ``executor.*`` values)."""

    service_account_name: str = EXECUTOR_NAME
    secret_name: str = "studio-executor-secrets"
    secret_env: tuple[SecretEnv, ...] = DEFAULT_SECRET_ENV
    # Commands in a pod: Landlock works unprivileged; bubblewrap only where user namespaces
    # are allowed. ``required`` takes the strongest that works and refuses commands otherwise.
    sandbox_mode: str = "required"
    extra_env: Mapping[str, str] = field(default_factory=dict)
    active_deadline_seconds: int = 3600
    ttl_seconds_after_finished: int = 3600
    termination_grace_period_seconds: int = 30
    cpu_request: str = "500m"
    cpu_limit: str = "2"
    memory_request: str = "1Gi"
    memory_limit: str = "4Gi"
    # Covers the emptyDir volumes below plus logs; keep it above their sum.
    ephemeral_storage_request: str = "2Gi"
    ephemeral_storage_limit: str = "8Gi"
    workspace_size_limit: str = "6Gi"
    tmp_size_limit: str = "1Gi"
    home_size_limit: str = "512Mi"
    run_as_user: int = 10001
    run_as_group: int = 10001
    fs_group: int = 10001
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: tuple[str, ...] = ()
    # ``False`` asks for a user-namespaced pod (Kubernetes >= 1.30 with UserNamespacesSupport),
    # where bubblewrap can create its namespaces; ``None`` leaves the field out.
    host_users: bool | None = None
    priority_class_name: str | None = None
    node_selector: Mapping[str, str] = field(default_factory=dict)
    # Tolerations as the API spells them (``key``, ``operator``, ``value``, ``effect``, ...).
    tolerations: tuple[Mapping[str, Any], ...] = ()
    # Cloud auth (services.executors.cloud_env): credential files and a web identity token.
    secret_files: tuple[SecretFile, ...] = ()
    web_identity: WebIdentityToken | None = None
    # The pod reads STUDIO_DATABASE_URL from its own login Secret (:func:`login_secret_name`),
    # made by the worker with a per-execution database login; never the deployment's.
    login_secret: bool = False
    # Further keys of that Secret, read under their own names (the GitHub token the worker
    # resolved for this execution); the executor Secret's key of the same name is not read.
    login_secret_keys: tuple[str, ...] = ()


def job_name(execution_id: str) -> str:
    """``studio-exec-<short id>``: a DNS-1123 name derived from the execution id.

    The short id is the id's first alphanumerics (a uuid4 gives 12 hex digits); an id with fewer
    than that is hashed. A collision is caught at launch by the execution-id label.
    """
    compact = re.sub(r"[^a-z0-9]", "", execution_id.lower())
    if len(compact) < SHORT_ID_LENGTH:
        compact = hashlib.sha256(execution_id.encode()).hexdigest()
    return JOB_NAME_PREFIX + compact[:SHORT_ID_LENGTH]


def login_secret_name(execution_id: str) -> str:
    """The Secret holding the Job's own database URL (``<job name>-login``)."""
    return job_name(execution_id) + "-login"


def job_labels(execution_id: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": EXECUTOR_NAME,
        "app.kubernetes.io/component": "executor",
        "app.kubernetes.io/managed-by": "studio",
        EXECUTION_ID_LABEL: execution_id,
    }


def execution_selector(execution_id: str) -> str:
    """The label selector of one execution's Job."""
    return f"app.kubernetes.io/name={EXECUTOR_NAME},{EXECUTION_ID_LABEL}={execution_id}"


def build_job(
    execution_id: str, *, image: str, namespace: str, settings: JobSettings
) -> client.V1Job:
    """The Job that runs ``studio execute <execution_id>`` in ``namespace``."""
    if not _LABEL_VALUE.match(execution_id):
        raise ValueError(f"execution id {execution_id!r} is not usable as a label value")
    _check_extra_env(settings)
    labels = job_labels(execution_id)
    return client.V1Job(
        api_version="batch/v1",
        kind="Job",
        metadata=client.V1ObjectMeta(
            name=job_name(execution_id), namespace=namespace, labels=labels
        ),
        spec=client.V1JobSpec(
            backoff_limit=0,
            active_deadline_seconds=settings.active_deadline_seconds,
            ttl_seconds_after_finished=settings.ttl_seconds_after_finished,
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels=labels),
                spec=_pod_spec(execution_id, image, settings),
            ),
        ),
    )


def login_secret(job: client.V1Job, values: Mapping[str, SecretStr]) -> client.V1Secret:
    """The Secret of a created ``job``'s own login (``values``: STUDIO_DATABASE_URL, and the
    secrets the worker hands on), owned by the Job so that it goes when the Job goes. It holds
    secret values: it is sent to the API server and never logged."""
    metadata = job.metadata
    if metadata is None or not metadata.uid or not metadata.name:
        raise ValueError("a login Secret needs the created Job (its name and uid)")
    labels = dict(metadata.labels or {})
    data = {key: base64.b64encode(value.get_secret_value().encode()).decode()
            for key, value in values.items()}
    return client.V1Secret(
        api_version="v1", kind="Secret", type="Opaque", data=data,
        metadata=client.V1ObjectMeta(
            name=metadata.name + "-login", namespace=metadata.namespace, labels=labels,
            owner_references=[client.V1OwnerReference(
                api_version="batch/v1", kind="Job", name=metadata.name, uid=metadata.uid,
                block_owner_deletion=True)]))


def job_to_dict(job: client.V1Job) -> dict[str, Any]:
    """The Job as the JSON the API server receives (camelCase keys, no ``None`` fields)."""
    serialize = client.ApiClient().sanitize_for_serialization
    data = serialize(job)  # type: ignore[no-untyped-call]  # the client leaves it unannotated
    if not isinstance(data, dict):
        raise TypeError("a V1Job serialises to a JSON object")
    return data


def _pod_spec(execution_id: str, image: str, settings: JobSettings) -> client.V1PodSpec:
    return client.V1PodSpec(
        restart_policy="Never",
        service_account_name=settings.service_account_name,
        automount_service_account_token=False,
        enable_service_links=False,
        termination_grace_period_seconds=settings.termination_grace_period_seconds,
        host_users=settings.host_users,
        priority_class_name=settings.priority_class_name,
        image_pull_secrets=[
            client.V1LocalObjectReference(name=name) for name in settings.image_pull_secrets
        ]
        or None,
        security_context=client.V1PodSecurityContext(
            run_as_non_root=True,
            run_as_user=settings.run_as_user,
            run_as_group=settings.run_as_group,
            fs_group=settings.fs_group,
            seccomp_profile=client.V1SeccompProfile(type="RuntimeDefault"),
        ),
        node_selector=dict(settings.node_selector) or None,
        tolerations=[_toleration(item) for item in settings.tolerations] or None,
        containers=[_container(execution_id, image, settings)],
        volumes=[
            _empty_dir("workspace", settings.workspace_size_limit),
            _empty_dir("tmp", settings.tmp_size_limit),
            _empty_dir("home", settings.home_size_limit),
            *_credential_volumes(settings),
        ],
    )


def _container(execution_id: str, image: str, settings: JobSettings) -> client.V1Container:
    return client.V1Container(
        name=CONTAINER_NAME,
        image=image,
        image_pull_policy=settings.image_pull_policy,
        command=["studio", "execute", execution_id],
        working_dir=WORKSPACE_DIR,
        env=_env(execution_id, settings),
        resources=client.V1ResourceRequirements(
            requests={
                "cpu": settings.cpu_request,
                "memory": settings.memory_request,
                "ephemeral-storage": settings.ephemeral_storage_request,
            },
            limits={
                "cpu": settings.cpu_limit,
                "memory": settings.memory_limit,
                "ephemeral-storage": settings.ephemeral_storage_limit,
            },
        ),
        security_context=client.V1SecurityContext(
            run_as_non_root=True,
            read_only_root_filesystem=True,
            allow_privilege_escalation=False,
            privileged=False,
            capabilities=client.V1Capabilities(drop=["ALL"]),
        ),
        volume_mounts=[
            client.V1VolumeMount(name="workspace", mount_path=WORKSPACE_DIR),
            client.V1VolumeMount(name="tmp", mount_path=TMP_DIR),
            client.V1VolumeMount(name="home", mount_path=HOME_DIR),
            *_credential_mounts(settings),
        ],
    )


def _env(execution_id: str, settings: JobSettings) -> list[client.V1EnvVar]:
    plain = {
        "STUDIO_WORKSPACE_DIR": WORKSPACE_DIR,
        "STUDIO_SANDBOX": settings.sandbox_mode,
        # No mirror is shared with a pod: a mirror there would be a second full copy.
        "STUDIO_REPO_MIRRORS": "false",
        "HOME": HOME_DIR,
        "TMPDIR": TMP_DIR,
        **settings.extra_env,
        **{file.env: file.path for file in settings.secret_files},
    }
    if settings.web_identity is not None:
        plain["AWS_WEB_IDENTITY_TOKEN_FILE"] = WEB_IDENTITY_TOKEN_PATH
    variables = [client.V1EnvVar(name=name, value=value) for name, value in plain.items()]
    for secret in settings.secret_env:
        if settings.login_secret and (secret.name in MASTER_SECRETS
                                      or secret.name in settings.login_secret_keys):
            continue  # the pod's own login Secret replaces them
        selector = client.V1SecretKeySelector(
            name=settings.secret_name,
            key=secret.key or secret.name,
            optional=True if secret.optional else None,
        )
        source = client.V1EnvVarSource(secret_key_ref=selector)
        variables.append(client.V1EnvVar(name=secret.name, value_from=source))
    if settings.login_secret:
        for name in (DATABASE_URL, *settings.login_secret_keys):
            selector = client.V1SecretKeySelector(name=login_secret_name(execution_id), key=name)
            variables.append(client.V1EnvVar(
                name=name, value_from=client.V1EnvVarSource(secret_key_ref=selector)))
    return variables


def _credential_volumes(settings: JobSettings) -> list[client.V1Volume]:
    volumes = [
        client.V1Volume(name=_file_volume(index), secret=client.V1SecretVolumeSource(
            secret_name=settings.secret_name, default_mode=0o440,
            items=[client.V1KeyToPath(key=file.key, path=file.file_name)]))
        for index, file in enumerate(settings.secret_files)
    ]
    token = settings.web_identity
    if token is not None:
        projection = client.V1ServiceAccountTokenProjection(
            audience=token.audience, expiration_seconds=token.expiration_seconds, path="token")
        volumes.append(client.V1Volume(name="aws-web-identity-token", projected=(
            client.V1ProjectedVolumeSource(default_mode=0o440, sources=[
                client.V1VolumeProjection(service_account_token=projection)]))))
    return volumes


def _credential_mounts(settings: JobSettings) -> list[client.V1VolumeMount]:
    mounts = [client.V1VolumeMount(name=_file_volume(index), mount_path=file.mount_dir,
                                   read_only=True)
              for index, file in enumerate(settings.secret_files)]
    if settings.web_identity is not None:
        mounts.append(client.V1VolumeMount(name="aws-web-identity-token",
                                           mount_path=WEB_IDENTITY_TOKEN_DIR, read_only=True))
    return mounts


def _file_volume(index: int) -> str:
    return f"credentials-{index}"


def _check_extra_env(settings: JobSettings) -> None:
    secret_names = {secret.name for secret in settings.secret_env}
    for name in settings.extra_env:
        if name in secret_names or any(hint in name.upper() for hint in _SECRET_NAME_HINTS):
            raise ValueError(
                f"{name} looks like a credential: give it through the executor Secret "
                "(secret_env), never as a literal value in the Job"
            )


def _toleration(item: Mapping[str, Any]) -> client.V1Toleration:
    known = {"key": "key", "operator": "operator", "value": "value", "effect": "effect",
             "tolerationSeconds": "toleration_seconds"}
    unknown = sorted(set(item) - set(known))
    if unknown:
        raise ValueError(f"toleration has unknown fields: {', '.join(unknown)}")
    return client.V1Toleration(**{known[key]: value for key, value in item.items()})


def _empty_dir(name: str, size_limit: str) -> client.V1Volume:
    source = client.V1EmptyDirVolumeSource(size_limit=size_limit)
    return client.V1Volume(name=name, empty_dir=source)
