"""Request and response bodies of the API (their JSON Schemas are the published OpenAPI)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from services.execution.providers.profiles import PROVIDERS

if TYPE_CHECKING:
    Provider = str
else:  # the provider profiles' names, in their order: the OpenAPI enum and the validation
    Provider = Literal[PROVIDERS]
ModelEntry = str | dict[str, Any]  # "provider[:model]" or {"provider": ..., "model": ...}
ROLE_HELP = "implementer | reviewer | tester: a prompt and a tool subset (docs: agents)."
SYSTEM_PROMPT_HELP = "Text added to the system prompt (at most 32000 characters)."
MCP_SERVERS_HELP = "Stored MCP servers (GET /api/mcp-servers) this agent gets; none by default."
MODELS_HELP = ("Models in the order they are tried when a provider stays unavailable; the first "
               "is provider/model.")
EXECUTION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class RunLimits(BaseModel):
    """Per-execution limits on top of the runtime settings' defaults."""

    model_config = ConfigDict(extra="forbid")

    max_iterations: int | None = Field(default=None, ge=1, le=1000)
    max_budget_usd: float | None = Field(default=None, ge=0, le=10_000)
    wall_clock_s: float | None = Field(default=None, gt=0, le=7 * 86_400)
    stall_s: float | None = Field(default=None, gt=0, le=86_400)


class ExecutionCreate(BaseModel):
    """``POST /api/executions``: a standalone execution on a repository."""

    model_config = ConfigDict(extra="forbid")

    repo_url: str = Field(min_length=1, max_length=2048,
                          description="https:// (http:// only to a loopback host); no local "
                                      "paths, file://, ext:: or option-like values.")
    provider: Provider
    kind: Literal["change", "review"] = Field(
        default="change", description="``change`` (the default) changes the code; ``review`` "
        "reviews pull request ``pr`` read-only and posts one GitHub review (docs: review).")
    pr: int | None = Field(default=None, ge=1, le=9_999_999,
                           description="The pull request a review reviews (kind review).")
    head_sha: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$",
                                 description="The head a review reviews (default: the pull "
                                             "request's head when it runs).")
    prompt: str | None = Field(default=None, min_length=1, max_length=200_000,
                               description="The task (required unless kind is review).")
    model: str | None = Field(default=None, min_length=1, max_length=200)
    base_branch: str | None = Field(default=None, min_length=1, max_length=255)
    pull_request: bool = Field(default=False,
                               description="Open (or reuse) a pull request when the run ends.")
    replay_script: dict[str, Any] | None = Field(
        default=None, description="The replay provider's script, inline (required for replay).")
    limits: RunLimits | None = None
    role: str | None = Field(default=None, max_length=50, description=ROLE_HELP)
    system_prompt: str | None = Field(default=None, description=SYSTEM_PROMPT_HELP)
    mcp_servers: list[str] | None = Field(default=None, description=MCP_SERVERS_HELP)
    models: list[ModelEntry] | None = Field(default=None, description=MODELS_HELP)
    approval_policy: dict[str, str] | None = Field(
        default=None, description="Tool calls gated by key (\"domain.operation\", "
        "\"domain.*\" or \"*\"): \"allow\", \"deny\" or \"require\" (a person's approval).")
    setup: list[str] = Field(
        default_factory=list, max_length=32,
        description="Setup commands (shell lines) run before the model, with network only to "
                    "the allowlist (after the repository's own .studio/setup.json).")
    network: Literal["offline", "allowlist"] = Field(
        default="offline", description="The agent's commands: offline, or through the egress "
                                        "proxy to the allowlist like setup commands.")
    network_allowlist: list[str] = Field(
        default_factory=list, max_length=200,
        description="Host names or .suffix entries added to the deployment's allowlist.")


class ExecutionCreated(BaseModel):
    id: str
    status: str


class WorkspaceDisk(BaseModel):
    """What an execution's workspace holds itself, measured when it was provisioned."""

    own_bytes: int = Field(description=(
        "Bytes in the execution's directory: the checkout, the index, refs and config, and the "
        "objects the clone holds itself (not those it borrows from the mirror cache)."))
    checkout_bytes: int = Field(description="Bytes of the checked-out files (outside ``.git``).")
    borrows_mirror: bool = Field(description=(
        "Whether the clone borrows its history from the mirror cache "
        "(``objects/info/alternates``) instead of holding a copy."))


class Execution(BaseModel):
    """One execution as recorded (no lease internals)."""

    id: str
    status: str
    runtime: str
    provider: str
    model: str
    repo_url: str | None
    workspace: str | None
    base_branch: str | None
    branch: str | None
    base_commit: str | None
    head_sha: str | None
    pr_url: str | None
    prompt: str
    limits: dict[str, Any]
    settings_snapshot: dict[str, Any]
    outcome: str | None
    result: dict[str, Any] | None
    usage: dict[str, Any] | None
    cost_usd: float
    iterations: int
    cancel_requested: bool
    error_code: str | None
    error_message: str | None
    flowchart_run_id: str | None
    node_id: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    paused_reason: str | None = Field(None, description=(
        "``killswitch`` while the kill switch holds the execution back (status ``queued``): it "
        "resumes where it was once the switch is released; else null."))
    paused_at: str | None = None
    team_id: str | None = Field(None, description="The team the execution belongs to.")
    created_by: str | None = Field(None, description="Who created it (an API token's name, "
                                                     "``cli:<user>``).")
    waiting_reason: str | None = Field(None, description=(
        "``team_concurrency`` while the execution stays queued because its team runs as many "
        "executions as its concurrency limit allows; else null."))
    retry_at: str | None = Field(None, description=(
        "While the execution waits to be retried after an infrastructure error (status "
        "``queued``): when its next attempt is due; else null."))
    last_error: dict[str, Any] | None = Field(None, description=(
        "The last failed attempt's error (attempt, code, kind, message, at, retry_at)."))
    attempt_errors: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Every failed attempt's error, in order (a dead-lettered execution shows them all)."))
    operator_actions: list[dict[str, Any]] = Field(default_factory=list, description=(
        "Operators' retries and discards of the dead-lettered execution: action, by, at."))
    workspace_disk: WorkspaceDisk | None = Field(None, description=(
        "The workspace's own disk use when it was provisioned; null before that (or for an "
        "execution recorded before it was measured)."))


class ExecutionList(BaseModel):
    executions: list[Execution]


class ToolCall(BaseModel):
    """Evidence of one tool call (arguments and envelope redacted)."""

    call_id: str
    cycle: int | None
    provider: str | None
    tool_name: str
    domain: str
    operation: str
    args: dict[str, Any] | None
    ok: bool | None
    error_code: str | None
    duration_ms: float | None
    request_id: str | None
    correlation_id: str | None
    envelope: dict[str, Any] | None
    created_at: str | None
    finished_at: str | None
    approval: dict[str, Any] | None = None


class ToolCallList(BaseModel):
    execution_id: str
    tool_calls: list[ToolCall]


class CancelAccepted(BaseModel):
    id: str
    cancel_requested: bool
    status: str


class SettingValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    value: Any = Field(description="A JSON value of the setting's type.")


class Setting(BaseModel):
    key: str
    value: Any


class SettingsAll(BaseModel):
    settings: dict[str, Any]


class KillSwitch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engaged: bool


class ProviderMatrix(BaseModel):
    providers: list[dict[str, Any]]


class Health(BaseModel):
    ok: bool


class Readiness(BaseModel):
    ok: bool
    database: dict[str, Any]
    # The command sandbox: configured and effective mode, and a warning when commands are
    # unconfined (STUDIO_SANDBOX=none).
    sandbox: dict[str, Any] | None = None


class ApprovalDecision(BaseModel):
    """``POST /api/executions/{id}/approvals/{approval_id}``: a person's decision."""

    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "deny"]
    reason: str | None = Field(default=None, max_length=4000)


class Approval(BaseModel):
    """One approval a gated tool call asked for, and its decision."""

    id: str
    execution_id: str
    call_id: str
    tool_name: str
    tool: str
    args: dict[str, Any] | None
    rule: str
    status: str
    decided_by: str | None
    requested_by: str | None = Field(None, description="Who created the execution the call "
                                                       "belongs to (the audit's other identity).")
    reason: str | None
    requested_at: str | None
    expires_at: str | None
    decided_at: str | None


class ApprovalList(BaseModel):
    execution_id: str
    approvals: list[Approval]


class ApprovalDecided(BaseModel):
    approval: Approval
    changed: bool
    resumed: bool
