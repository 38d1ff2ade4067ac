"""Deployment configuration: the only module that reads environment variables.

Values here are fixed for the life of a process (the sandbox mode above all). Runtime settings
that operators change while the system runs (kill switch, cutover, limits) live in the database.
"""

from __future__ import annotations

import json
import os
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from platformdirs import user_data_dir
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

ENV_PREFIX = "STUDIO_"


class SandboxMode(StrEnum):
    AUTO = "auto"
    REQUIRED = "required"
    BWRAP = "bwrap"
    LANDLOCK = "landlock"
    NONE = "none"


class ExecutorKind(StrEnum):
    """Where the worker runs ``studio execute``: a local subprocess or a Kubernetes Job."""

    LOCAL = "local"
    KUBERNETES = "kubernetes"


class ClaudeAuth(StrEnum):
    """``STUDIO_CLAUDE_AUTH``: how the Claude Code CLI authenticates (docs: providers)."""

    API_KEY = "api_key"
    BEDROCK = "bedrock"
    BEDROCK_WEB_IDENTITY = "bedrock_web_identity"
    ANTHROPIC_AWS = "anthropic_aws"  # Claude Platform on AWS
    ANTHROPIC_AWS_WEB_IDENTITY = "anthropic_aws_web_identity"
    VERTEX = "vertex"


class GeminiAuth(StrEnum):
    """``STUDIO_GEMINI_AUTH``: a Gemini API key, or Vertex AI with application default
    credentials."""

    API_KEY = "api_key"
    VERTEX = "vertex"


class CodexAuth(StrEnum):
    """``STUDIO_CODEX_AUTH``: an OpenAI API key, or Azure OpenAI."""

    API_KEY = "api_key"
    AZURE = "azure"


class StudioSettings(BaseModel):
    """``STUDIO_*`` environment variables, read when an instance is made (keyword arguments
    win over the environment).

    Each field ``name`` is ``STUDIO_NAME`` (the name's case does not matter); the variable's text
    is validated as is: lists and JSON are split and decoded by the validators below, so that a
    bad value is a clear error. Defaults are validated too. These are the rules pydantic-settings
    applied here (prefix, case-insensitive names, no decoding, defaults validated); reading them
    without it spares every process its import (asyncio, argparse and its sources: about a
    quarter of ``studio --help``).
    """

    model_config = ConfigDict(extra="ignore", validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _environment_first(cls, data: Any) -> Any:
        if isinstance(data, dict):
            return {**environment_values(), **data}
        return data

    sandbox: SandboxMode = SandboxMode.AUTO
    # STUDIO_ENV: "production" refuses every command when no sandbox works (never unconfined).
    env: str = "development"
    # Limits of every sandboxed command (its whole process tree where a cgroup is available).
    sandbox_memory_mb: int = Field(default=4096, ge=64)
    sandbox_processes: int = Field(default=1024, ge=8)
    sandbox_open_files: int = Field(default=4096, ge=64)
    sandbox_file_size_mb: int = Field(default=4096, ge=1)
    sandbox_cpu_seconds: int = Field(default=3600, ge=1)
    sandbox_tmp_mb: int = Field(default=1024, ge=1)
    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("studio", appauthor=False)))
    database_url: SecretStr | None = None
    broker_url: SecretStr | None = None
    # The Celery queue node executions are sent to and workers consume (one per deployment).
    worker_queue: str = "studio"
    # ``studio worker``'s process model (docs: worker): on (the default), a thread per slot, one
    # database for the slots, and a warm fork server that forks each execution's process (issue
    # 39); off, a prefork pool whose processes each exec a fresh ``studio execute`` per execution.
    worker_fork_server: bool = True
    # Seconds before Redis hands a message its worker never acknowledged (killed) to another.
    broker_visibility_timeout_s: float = Field(default=300.0, gt=0)
    secret_key: SecretStr | None = None
    github_token: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    # The git origins (``scheme://host[:port]``) the GitHub token may be sent to, comma-separated;
    # empty: derived from the API URL (services.repos.origins).
    github_git_origins: list[str] = Field(default_factory=list)
    # Review executions (services.runs.review): whether a review may approve a pull request,
    # and the directory of organization-wide review instructions (every ``*.md``, in name order).
    review_allow_approve: bool = False
    review_instructions_dir: Path | None = None
    # Repository hosts allowed although they are (or resolve to) loopback, private, link-local
    # or metadata addresses: names, addresses or CIDR networks, comma-separated
    # (services.repos.hosts).
    repo_allowed_hosts: list[str] = Field(default_factory=list)
    mcp_config: Path | None = None
    # In an executor pod with an execution login (kube_execution_logins): the stored MCP servers
    # its agent names, secrets decrypted by the worker that launched it (JSON of McpConfig); the
    # pod can neither read mcp_servers nor decrypt it (no STUDIO_SECRET_KEY).
    execution_mcp: SecretStr | None = None
    # STUDIO_MODEL_PRICES: JSON object of price overrides, USD per 1M tokens, e.g.
    # {"gpt-5.1": {"input": 1.0, "output": 8.0, "cached_input": 0.1}} (services.execution.pricing).
    model_prices: dict[str, dict[str, float]] = Field(default_factory=dict)
    # The Claude Code CLI of the legacy runtime (default: the one bundled in claude-agent-sdk).
    legacy_claude_cli: Path | None = None
    # Where the npm-installed agent CLIs (codex, gemini) are; default: the project's
    # agent-clis/node_modules/.bin (scripts/setup.sh installs them there).
    legacy_cli_dir: Path | None = None
    workspace_dir: Path | None = None
    # Clone through the mirror cache under <data_dir>/mirrors (workspaces borrow its objects);
    # false: clone straight from the remote (an executor pod, whose data dir dies with it).
    repo_mirrors: bool = True
    log_level: str = "WARNING"  # STUDIO_LOG_LEVEL: INFO adds one line per tool call
    git_author_name: str = "Studio Agent"
    git_author_email: str = "studio-agent@localhost"
    # Alembic scripts; by default the top-level ``migrations/`` of the source checkout.
    migrations_dir: Path | None = None
    # Flowcharts: the most node executions (agent and command nodes) one run may start.
    flowchart_max_node_executions: int = Field(default=50, ge=1)
    # Finished executions older than this many days are deleted by ``studio db prune`` (their
    # journal, evidence, checkpoints and blobs with them); unset: kept until pruned explicitly.
    retention_days: int | None = Field(default=None, ge=1, le=36_500)
    # how long a tool call waits for a person's approval before it counts as denied
    approval_timeout_s: float = Field(default=86_400.0, gt=0, le=30 * 86_400)
    # teams (docs: teams): the key that signs budget alerts POSTed to a team's notification
    # URL (HMAC-SHA256; unset: the alerts are sent unsigned), and their delivery's retries
    team_alert_secret: SecretStr | None = None
    team_alert_attempts: int = Field(default=5, ge=1, le=20)
    team_alert_backoff_s: float = Field(default=1.0, gt=0, le=600)
    # The largest request body the HTTP API reads (bytes); past it, 413 request_too_large.
    api_max_body_bytes: int = Field(default=4 * 1024 * 1024, ge=1024)
    # The largest GitHub webhook delivery POST /api/webhooks/github reads (bytes); past it, 413.
    webhook_max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    # Where people reach this deployment's pages (run links in comments on GitHub); "" : none.
    public_url: str = ""
    # Origins allowed to call the HTTP API from a browser (CORS), comma-separated; none by default.
    cors_origins: list[str] = Field(default_factory=list)
    # The setup phase (services.runs.setup_phase): hosts its commands, and the agent commands of
    # an execution with network "allowlist", may reach through the egress proxy, comma-separated
    # (names, ".suffix", name:port, and ADDRESS:PORT to open that one loopback or private port).
    setup_allowlist: list[str] = Field(default_factory=lambda: [
        "pypi.org", "files.pythonhosted.org", "registry.npmjs.org"])
    # Seconds each setup command may run before its process tree is killed (the setup fails).
    setup_timeout_s: float = Field(default=900.0, gt=0, le=86_400)
    # The setup phase's dependency caches (services.repos.dependency_caches): at most this many
    # MiB together (least recently used removed first) and none unused for longer than this many
    # days.
    dependency_cache_max_mb: int = Field(default=10_240, ge=1, le=16 * 1024 * 1024)
    dependency_cache_max_age_days: int = Field(default=14, ge=1, le=3650)

    # How each provider authenticates (services.execution.providers.cloud_auth lists what each
    # mode reads from the SDKs' own variables).
    claude_auth: ClaudeAuth = ClaudeAuth.API_KEY
    gemini_auth: GeminiAuth = GeminiAuth.API_KEY
    codex_auth: CodexAuth = CodexAuth.API_KEY

    # The node executor (services.executors.selection); the kube_* settings below apply to
    # ``kubernetes`` only (the Helm chart's ``executor.*`` values hand them over).
    executor: ExecutorKind = ExecutorKind.LOCAL
    kube_namespace: str | None = None  # none: the worker pod's own namespace, else "default"
    # Required with STUDIO_EXECUTOR=kubernetes.
    kube_image: str | None = Field(default=None, validate_default=True)
    kube_image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    kube_image_pull_secrets: list[str] = Field(default_factory=list)
    kube_service_account: str = "studio-executor"
    # The Secret the executor pod reads its credentials from (database URL, secret key, GitHub
    # token, provider keys), by secretKeyRef: its values never pass through the worker.
    kube_secret_name: str = "studio-executor-secrets"
    # A per-execution PostgreSQL login for each Job (services.db.execution_logins): the pod gets
    # its own database URL in a Secret of its Job, never STUDIO_DATABASE_URL nor STUDIO_SECRET_KEY.
    kube_execution_logins: bool = False
    kube_cpu_request: str = "500m"
    kube_cpu_limit: str = "2"
    kube_memory_request: str = "1Gi"
    kube_memory_limit: str = "4Gi"
    # JSON object and JSON list (decoded by _json below, so that bad JSON is a clear error).
    kube_node_selector: dict[str, str] = Field(default_factory=dict)
    kube_tolerations: list[dict[str, Any]] = Field(default_factory=list)
    kube_active_deadline_seconds: int = Field(default=3600, ge=60)
    kube_ttl_seconds_after_finished: int = Field(default=3600, ge=0)
    kube_sandbox: SandboxMode = SandboxMode.REQUIRED  # STUDIO_SANDBOX inside the executor pod
    # Web identity modes: the IAM role the executor pod assumes (none: the worker's AWS_ROLE_ARN),
    # and the lifetime of its projected service-account token.
    kube_aws_role_arn: str | None = None
    kube_web_identity_token_seconds: int = Field(default=86400, ge=600, le=86400 * 2)
    # A kubeconfig file; none: in-cluster config in a pod, else the client's default kubeconfig.
    kubeconfig: Path | None = None

    @field_validator("cors_origins", "github_git_origins", "repo_allowed_hosts",
                     "kube_image_pull_secrets", "setup_allowlist", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("kube_node_selector", "kube_tolerations", mode="before")
    @classmethod
    def _json(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, str):
            if not value.strip():
                return {} if info.field_name == "kube_node_selector" else []
            try:
                return json.loads(value)
            except ValueError as exc:
                raise ValueError(f"not JSON: {exc}") from exc
        return value

    @field_validator("model_prices", mode="before")
    @classmethod
    def _prices(cls, value: object) -> object:
        return model_price_overrides(value)

    @field_validator("kube_image")
    @classmethod
    def _kubernetes_needs_an_image(cls, value: str | None, info: ValidationInfo) -> str | None:
        # A field validator, not a model one: a model error would echo every input (secrets).
        if info.data.get("executor") is ExecutorKind.KUBERNETES and not (value or "").strip():
            raise ValueError("STUDIO_EXECUTOR=kubernetes needs STUDIO_KUBE_IMAGE (the executor "
                             "image the Job runs)")
        return value


def environment_values() -> dict[str, str]:
    """The ``STUDIO_*`` variables of this process that name a setting: field name -> text."""
    wanted = {ENV_PREFIX.lower() + name: name for name in StudioSettings.model_fields}
    return {wanted[key.lower()]: value for key, value in os.environ.items()
            if key.lower() in wanted}


PRICE_FIELDS = frozenset({"input", "output", "cached_input"})


def model_price_overrides(value: object) -> dict[str, dict[str, float]]:
    """``STUDIO_MODEL_PRICES`` checked: model name -> {input, output[, cached_input]}, USD per
    1M tokens, each a number from 0 to 10 000."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError("a JSON object of model name -> {input, output, cached_input}")
    prices: dict[str, dict[str, float]] = {}
    for name, price in value.items():
        if not isinstance(name, str) or not 0 < len(name) <= 200:
            raise ValueError("a model name has 1 to 200 characters")
        if not isinstance(price, dict) or not {"input", "output"} <= set(price) <= PRICE_FIELDS:
            raise ValueError(f"the price of {name[:50]!r} is {{input, output[, cached_input]}}")
        checked: dict[str, float] = {}
        for key, number in price.items():
            if isinstance(number, bool) or not isinstance(number, int | float) \
                    or not 0 <= number <= 10_000:
                raise ValueError(f"{name[:50]!r}.{key} is a number from 0 to 10000")
            checked[key] = float(number)
        prices[name.lower()] = checked
    return prices


def is_production(settings: StudioSettings) -> bool:
    """Whether this deployment says it is production (``STUDIO_ENV=production``)."""
    return settings.env.strip().lower() == "production"


@lru_cache(maxsize=1)
def get_settings() -> StudioSettings:
    """The process-wide settings, read once."""
    return StudioSettings()


# Provider credentials read by the SDKs themselves; listed so that they can be redacted everywhere.
PROVIDER_SECRET_VARIABLES: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
    "ANTHROPIC_AWS_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_AD_TOKEN",
)


def provider_secret_values() -> list[str]:
    """The values of the provider credentials present in the environment (for redaction)."""
    return [value for name in PROVIDER_SECRET_VARIABLES if (value := os.environ.get(name))]


def process_environment() -> dict[str, str]:
    """A copy of the process environment, for adapters that filter it through an allowlist."""
    return dict(os.environ)


def mcp_base_environment() -> dict[str, str]:
    """What a stdio MCP server inherits besides its configured env: the locale only."""
    return {name: value for name in ("LANG", "LC_ALL") if (value := os.environ.get(name))}


# OpenTelemetry's own variables, read by its SDK when tracing is on (services.telemetry.tracing);
# handed to ``studio execute`` (a local child, a Kubernetes Job) so that it exports the same way.
# Headers (OTEL_EXPORTER_OTLP_HEADERS) may carry credentials: they are not handed on.
TRACE_ENDPOINT_VARIABLES: tuple[str, ...] = (
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)
TELEMETRY_VARIABLES: tuple[str, ...] = (
    *TRACE_ENDPOINT_VARIABLES,
    "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SDK_DISABLED",
    "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
    "OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "PROMETHEUS_MULTIPROC_DIR",
)
# The W3C trace context of the span that started a process (``studio execute``).
TRACE_CONTEXT_VARIABLES: tuple[str, ...] = ("TRACEPARENT", "TRACESTATE")


def tracing_configured() -> bool:
    """Whether traces are exported: an OTLP endpoint is set and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return any(os.environ.get(name, "").strip() for name in TRACE_ENDPOINT_VARIABLES)


def service_name_configured() -> bool:
    """Whether the operator named the service (``OTEL_SERVICE_NAME`` or a ``service.name`` in
    ``OTEL_RESOURCE_ATTRIBUTES``); if not, each command names its own."""
    attributes = os.environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return bool(os.environ.get("OTEL_SERVICE_NAME", "").strip()) or any(
        item.split("=", 1)[0].strip() == "service.name" for item in attributes.split(","))


def capture_message_content() -> bool:
    """``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``: prompts, answers and tool
    arguments go into spans (redacted); off by default."""
    value = os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() == "true"


def inherited_trace_context() -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE``) as the starting process set them, lower-cased the way
    the W3C propagator reads a carrier."""
    return {name.lower(): value for name in TRACE_CONTEXT_VARIABLES
            if (value := os.environ.get(name, "").strip())}


def telemetry_environment() -> dict[str, str]:
    """The telemetry variables of this process that ``studio execute`` should see too."""
    return {name: value for name in TELEMETRY_VARIABLES if (value := os.environ.get(name))}


def metrics_multiprocess_dir() -> str | None:
    """``PROMETHEUS_MULTIPROC_DIR``: where the processes behind one /metrics endpoint write."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None
