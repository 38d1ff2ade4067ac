"""How each provider authenticates: its auth modes, as data, and the checks of their values.

A deployment picks one mode per provider (``STUDIO_CLAUDE_AUTH``, ``STUDIO_GEMINI_AUTH``,
``STUDIO_CODEX_AUTH``); a mode says which environment variables its SDK or CLI reads:

- ``fixed``: switches the mode sets itself (``CLAUDE_CODE_USE_BEDROCK=1``);
- ``required`` and ``optional``: plain, non-secret values (region, project, endpoint, role ARN);
- ``secrets``: credentials (keys, tokens), passed only from the environment or, in a
  Kubernetes Job, by ``secretKeyRef``; ``credential_sets`` lists the alternatives of which one
  must be complete (Bedrock: an access key pair, or a Bedrock API key);
- ``credentials_file``: the variable naming a credentials file (Google's application default
  credentials), mounted from the executor Secret in a Job;
- ``web_identity``: the AWS web identity of the pod (``AWS_ROLE_ARN`` and
  ``AWS_WEB_IDENTITY_TOKEN_FILE``, as IRSA provides): a Job gets a projected service-account
  token for the audience ``sts.amazonaws.com``.

:func:`mode_environment` is the part of an environment a mode needs (and nothing else);
:func:`check_mode` refuses a missing or malformed value with a :class:`ConfigError` naming the
setting and the variable, never echoing a value. Nothing here reads the process environment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.execution.errors import ConfigError

API_KEY = "api_key"
WEB_IDENTITY_AUDIENCE = "sts.amazonaws.com"
WEB_IDENTITY_TOKEN_FILE = "AWS_WEB_IDENTITY_TOKEN_FILE"
ROLE_ARN = "AWS_ROLE_ARN"
CREDENTIALS_FILE = "GOOGLE_APPLICATION_CREDENTIALS"


def setting_name(provider: str) -> str:
    """The setting that picks ``provider``'s auth mode: ``STUDIO_<PROVIDER>_AUTH`` (the
    ``<provider>_auth`` field of the settings; the provider profile states it)."""
    return f"STUDIO_{provider.upper()}_AUTH"


@dataclass(frozen=True)
class AuthMode:
    """One way a provider authenticates (see the module docstring)."""

    provider: str
    name: str
    summary: str
    fixed: Mapping[str, str] = field(default_factory=dict)
    required: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    secrets: tuple[str, ...] = ()
    credential_sets: tuple[tuple[str, ...], ...] = ()
    credentials_file: str | None = None
    web_identity: bool = False

    @property
    def setting(self) -> str:
        return setting_name(self.provider)

    @property
    def names(self) -> frozenset[str]:
        """Every variable of the mode (what may pass to the executor and the CLI)."""
        names = {*self.fixed, *self.required, *self.optional, *self.secrets}
        if self.credentials_file:
            names.add(self.credentials_file)
        if self.web_identity:
            names |= {ROLE_ARN, WEB_IDENTITY_TOKEN_FILE}
        return frozenset(names)

    @property
    def plain(self) -> tuple[str, ...]:
        """The non-secret values (handed to a Job as literal values)."""
        return (*self.required, *self.optional)


_AWS_STATIC = (("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),)
_AWS_SECRETS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
# The STS endpoint and session name are optional: the SDK's defaults are the public STS.
_WEB_IDENTITY_OPTIONAL = ("AWS_ROLE_SESSION_NAME", "AWS_ENDPOINT_URL_STS",
                          "AWS_STS_REGIONAL_ENDPOINTS")

MODES: Mapping[str, Mapping[str, AuthMode]] = {
    "claude": {mode.name: mode for mode in (
        AuthMode("claude", API_KEY, "Anthropic API key (or auth token)",
                 optional=("ANTHROPIC_BASE_URL",),
                 secrets=("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"),
                 credential_sets=(("ANTHROPIC_API_KEY",), ("ANTHROPIC_AUTH_TOKEN",))),
        AuthMode("claude", "bedrock", "Amazon Bedrock, static AWS keys or a Bedrock API key",
                 fixed={"CLAUDE_CODE_USE_BEDROCK": "1"}, required=("AWS_REGION",),
                 optional=("ANTHROPIC_BEDROCK_BASE_URL",),
                 secrets=(*_AWS_SECRETS, "AWS_BEARER_TOKEN_BEDROCK"),
                 credential_sets=(*_AWS_STATIC, ("AWS_BEARER_TOKEN_BEDROCK",))),
        AuthMode("claude", "bedrock_web_identity",
                 "Amazon Bedrock, an IAM role assumed with a web identity token (IRSA)",
                 fixed={"CLAUDE_CODE_USE_BEDROCK": "1"}, required=("AWS_REGION",),
                 optional=("ANTHROPIC_BEDROCK_BASE_URL", *_WEB_IDENTITY_OPTIONAL),
                 web_identity=True),
        AuthMode("claude", "anthropic_aws", "Claude Platform on AWS, static AWS keys",
                 fixed={"CLAUDE_CODE_USE_ANTHROPIC_AWS": "1"},
                 required=("AWS_REGION", "ANTHROPIC_AWS_WORKSPACE_ID"),
                 optional=("ANTHROPIC_AWS_BASE_URL",),
                 secrets=(*_AWS_SECRETS, "ANTHROPIC_AWS_API_KEY"),
                 credential_sets=(*_AWS_STATIC, ("ANTHROPIC_AWS_API_KEY",))),
        AuthMode("claude", "anthropic_aws_web_identity",
                 "Claude Platform on AWS, an IAM role assumed with a web identity token",
                 fixed={"CLAUDE_CODE_USE_ANTHROPIC_AWS": "1"},
                 required=("AWS_REGION", "ANTHROPIC_AWS_WORKSPACE_ID"),
                 optional=("ANTHROPIC_AWS_BASE_URL", *_WEB_IDENTITY_OPTIONAL),
                 web_identity=True),
        AuthMode("claude", "vertex", "Google Vertex AI, application default credentials",
                 fixed={"CLAUDE_CODE_USE_VERTEX": "1"},
                 required=("ANTHROPIC_VERTEX_PROJECT_ID", "CLOUD_ML_REGION"),
                 optional=("ANTHROPIC_VERTEX_BASE_URL",), credentials_file=CREDENTIALS_FILE),
    )},
    "gemini": {mode.name: mode for mode in (
        AuthMode("gemini", API_KEY, "Gemini API key", optional=("GOOGLE_GEMINI_BASE_URL",),
                 secrets=("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                 credential_sets=(("GEMINI_API_KEY",), ("GOOGLE_API_KEY",))),
        AuthMode("gemini", "vertex", "Google Vertex AI, application default credentials",
                 required=("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION"),
                 optional=("GOOGLE_VERTEX_BASE_URL",), credentials_file=CREDENTIALS_FILE),
    )},
    "codex": {mode.name: mode for mode in (
        AuthMode("codex", API_KEY, "OpenAI API key", optional=("OPENAI_BASE_URL",),
                 secrets=("OPENAI_API_KEY",), credential_sets=(("OPENAI_API_KEY",),)),
        AuthMode("codex", "azure",
                 "Azure OpenAI: an api-key or a Microsoft Entra ID token; the model is the "
                 "deployment name",
                 required=("AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION"),
                 secrets=("AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN"),
                 credential_sets=(("AZURE_OPENAI_API_KEY",), ("AZURE_OPENAI_AD_TOKEN",))),
    )},
}

#: Every variable any mode reads (for allowlists that must know them all).
ALL_NAMES: frozenset[str] = frozenset(
    name for modes in MODES.values() for mode in modes.values() for name in mode.names)

_URL = re.compile(r"^https?://[A-Za-z0-9.\-\[\]:]+(?::\d{1,5})?(?:/[A-Za-z0-9._~\-/%]*)?$")
_FORMATS: Mapping[str, tuple[re.Pattern[str], str]] = {
    "AWS_REGION": (re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d{1,2}$"), "an AWS region (eu-west-1)"),
    "AWS_ROLE_ARN": (re.compile(r"^arn:aws[a-z\-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/\-]{1,512}$"),
                     "an IAM role ARN (arn:aws:iam::<account>:role/<name>)"),
    "AWS_ROLE_SESSION_NAME": (re.compile(r"^[A-Za-z0-9+=,.@\-]{2,64}$"), "a role session name"),
    "AWS_STS_REGIONAL_ENDPOINTS": (re.compile(r"^(?:regional|legacy)$"), "regional or legacy"),
    "ANTHROPIC_AWS_WORKSPACE_ID": (re.compile(r"^[A-Za-z0-9_\-]{1,128}$"), "a workspace id"),
    "ANTHROPIC_VERTEX_PROJECT_ID": (re.compile(r"^[a-z0-9.:\-]{4,63}$"), "a Google Cloud project"),
    "GOOGLE_CLOUD_PROJECT": (re.compile(r"^[a-z0-9.:\-]{4,63}$"), "a Google Cloud project"),
    "CLOUD_ML_REGION": (re.compile(r"^[a-z0-9\-]{2,40}$"), "a Google Cloud region (or global)"),
    "GOOGLE_CLOUD_LOCATION": (re.compile(r"^[a-z0-9\-]{2,40}$"),
                              "a Google Cloud location (or global)"),
    "OPENAI_API_VERSION": (re.compile(r"^(?:\d{4}-\d{2}-\d{2}(?:-preview)?|v1|latest|preview)$"),
                           "an Azure OpenAI api-version (2024-10-21)"),
    "GOOGLE_APPLICATION_CREDENTIALS": (re.compile(r"^/[^\x00-\x1f\x7f]{1,4095}$"),
                                       "an absolute file path"),
    "AWS_WEB_IDENTITY_TOKEN_FILE": (re.compile(r"^/[^\x00-\x1f\x7f]{1,4095}$"),
                                    "an absolute file path"),
}
_URL_NAMES = frozenset({"ANTHROPIC_BASE_URL", "ANTHROPIC_BEDROCK_BASE_URL",
                        "ANTHROPIC_AWS_BASE_URL",
                        "ANTHROPIC_VERTEX_BASE_URL", "GOOGLE_GEMINI_BASE_URL",
                        "GOOGLE_VERTEX_BASE_URL", "OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT",
                        "AWS_ENDPOINT_URL_STS"})
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def auth_mode(provider: str, name: str | None) -> AuthMode:
    """The mode ``name`` of ``provider`` (``None``: the API key mode)."""
    modes = MODES.get(provider)
    if modes is None:
        raise ConfigError(f"provider {provider!r} has no auth modes")
    found = modes.get(name or API_KEY)
    if found is None:
        raise ConfigError(f"{setting_name(provider)}: unknown auth mode; choose one of "
                          f"{', '.join(modes)}")
    return found


def mode_environment(mode: AuthMode, environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` that ``mode`` reads, plus its fixed switches."""
    env = {name: value for name, value in environ.items() if name in mode.names and value}
    env.update(mode.fixed)
    return env


def check_mode(mode: AuthMode, environ: Mapping[str, str], *,
               provided: Iterable[str] = ()) -> None:
    """Refuse a missing or malformed value of ``mode`` (``provided``: names something else will
    set, e.g. the token file path a Job mounts)."""
    given = set(provided)

    def present(name: str) -> bool:
        return name in given or bool(environ.get(name, "").strip())

    needed = list(mode.required)
    if mode.credentials_file:
        needed.append(mode.credentials_file)
    if mode.web_identity:
        needed += [ROLE_ARN, WEB_IDENTITY_TOKEN_FILE]
    missing = [name for name in needed if not present(name)]
    if missing:
        raise ConfigError(f"{mode.setting}={mode.name} needs {', '.join(missing)} (not set)")
    if mode.credential_sets and not any(all(present(n) for n in group)
                                        for group in mode.credential_sets):
        choices = " or ".join(" + ".join(group) for group in mode.credential_sets)
        raise ConfigError(f"{mode.setting}={mode.name} needs credentials: {choices} (not set)")
    for name in sorted(mode.names - set(mode.secrets) - set(mode.fixed)):
        value = environ.get(name)
        if value is not None and name not in given:
            problem = value_problem(name, value)
            if problem is not None:
                raise ConfigError(f"{mode.setting}={mode.name}: {name} is not {problem}")
    for name in mode.secrets:
        if _CONTROL.search(environ.get(name, "")):
            raise ConfigError(f"{mode.setting}={mode.name}: {name} holds control characters")


def value_problem(name: str, value: str) -> str | None:
    """What ``value`` should be when it is not acceptable for ``name``; ``None`` when fine."""
    if name in _URL_NAMES:
        return None if _URL.match(value) else "an http(s) URL without credentials or query"
    found = _FORMATS.get(name)
    if found is not None:
        pattern, wanted = found
        return None if pattern.match(value) else wanted
    return "free of control characters" if _CONTROL.search(value) else None


def modes_in(environ: Mapping[str, str]) -> dict[str, AuthMode]:
    """Each provider's mode as the ``STUDIO_*_AUTH`` values of ``environ`` name them (what a
    child given this environment will use); unset: the API key."""
    return {provider: auth_mode(provider, environ.get(setting_name(provider), "").strip() or None)
            for provider in MODES}
