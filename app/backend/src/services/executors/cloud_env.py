"""What an executor gets for the providers' auth modes (``providers.cloud_auth``).

- A local child: the variables of the configured modes found in the worker's environment
  (:func:`services.executors.local.executor_environment`), nothing of the other modes.
- A Kubernetes Job (:func:`pod_auth`): the modes' plain values as literal values (checked: a
  malformed value is refused, it would otherwise land in the manifest), their credentials by
  ``secretKeyRef`` to the executor Secret (every one optional: the Secret holds the ones the
  deployment uses), the Google credentials file mounted from the Secret's
  ``GOOGLE_APPLICATION_CREDENTIALS_JSON`` key, and for a web identity mode a projected
  service-account token (audience ``sts.amazonaws.com``) at the path ``AWS_WEB_IDENTITY_TOKEN_FILE``
  names, with ``AWS_ROLE_ARN`` from ``STUDIO_KUBE_AWS_ROLE_ARN`` (else the worker's own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from services.composition import configured_auth_modes
from services.execution.errors import ConfigError
from services.execution.providers import cloud_auth
from services.execution.providers.cloud_auth import AuthMode
from services.executors.pod_manifest import SecretEnv, SecretFile, WebIdentityToken
from services.settings import StudioSettings

GOOGLE_CREDENTIALS_KEY = "GOOGLE_APPLICATION_CREDENTIALS_JSON"
GOOGLE_CREDENTIALS_DIR = "/var/run/secrets/studio/google"
GOOGLE_CREDENTIALS_FILE = "credentials.json"
# Names the Job sets itself (paths of what it mounts).
_POD_PROVIDED = frozenset({cloud_auth.WEB_IDENTITY_TOKEN_FILE, cloud_auth.CREDENTIALS_FILE})


def settings_modes(settings: StudioSettings) -> dict[str, AuthMode]:
    """Each provider's configured auth mode (from the provider profiles, as the engine's)."""
    return configured_auth_modes(settings)


@dataclass(frozen=True)
class PodAuth:
    plain: dict[str, str] = field(default_factory=dict)
    secret_env: tuple[SecretEnv, ...] = ()
    secret_files: tuple[SecretFile, ...] = ()
    web_identity: WebIdentityToken | None = None


def pod_auth(settings: StudioSettings, environment: Mapping[str, str]) -> PodAuth:
    """The Job's share of the configured auth modes (see the module docstring)."""
    plain: dict[str, str] = {}
    secrets: dict[str, SecretEnv] = {}
    files: dict[str, SecretFile] = {}
    web_identity: WebIdentityToken | None = None
    role_arn = settings.kube_aws_role_arn or environment.get(cloud_auth.ROLE_ARN, "")
    for mode in settings_modes(settings).values():
        provided = set(_POD_PROVIDED) | set(mode.secrets)
        if mode.web_identity:
            provided.add(cloud_auth.ROLE_ARN)
        cloud_auth.check_mode(mode, environment, provided=provided)
        plain.update(mode.fixed)
        for name in mode.plain:
            if value := environment.get(name, "").strip():
                plain[name] = value
        for name in mode.secrets:
            secrets.setdefault(name, SecretEnv(name, optional=True))
        if mode.credentials_file:
            files[mode.credentials_file] = SecretFile(
                env=mode.credentials_file, key=GOOGLE_CREDENTIALS_KEY,
                mount_dir=GOOGLE_CREDENTIALS_DIR, file_name=GOOGLE_CREDENTIALS_FILE)
        if mode.web_identity:
            if not role_arn:
                raise ConfigError(f"{mode.setting}={mode.name} in a Kubernetes Job needs "
                                  "STUDIO_KUBE_AWS_ROLE_ARN (or AWS_ROLE_ARN on the worker)")
            if cloud_auth.value_problem(cloud_auth.ROLE_ARN, role_arn) is not None:
                raise ConfigError("STUDIO_KUBE_AWS_ROLE_ARN is not an IAM role ARN "
                                  "(arn:aws:iam::<account>:role/<name>)")
            plain[cloud_auth.ROLE_ARN] = role_arn
            web_identity = WebIdentityToken(
                expiration_seconds=settings.kube_web_identity_token_seconds)
    return PodAuth(plain=plain, secret_env=tuple(secrets.values()),
                   secret_files=tuple(files.values()), web_identity=web_identity)
