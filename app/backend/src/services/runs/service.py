"""The application service of a node execution: record it, run FrontierAgent on it, finish it.

Every run is an execution row; its events go to the journal (durable before they are shown), its
tool calls are keyed in the database (a resumed run never repeats one), the kill switch and
cancellation are read fresh before every model and tool call, and the repository's daily budget is
enforced across processes. Cutover off answers ``unsupported_capability`` until the legacy runtime
exists.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from services.composition import DEFAULT_MODELS, EngineRequest, build_engine, command_sandbox
from services.db.budget import DbBudget
from services.db.control import DbRunControl
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.errors import ConfigError, ErrorCode
from services.execution.guards import AgentLimits
from services.execution.mcp.bridge import McpHub
from services.execution.messages import AgentResult, AgentStatus, Message
from services.execution.outcomes import Outcome, RunResult, UsageTotals
from services.execution.ports import (
    AgentEvent,
    BudgetPort,
    EventSink,
    IdempotencyStore,
    ModelClient,
    RunControl,
    SelfDrivingEngine,
)
from services.execution.sinks import FanOutSink, LogSink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.registry import default_registry
from services.settings import StudioSettings, get_settings, mcp_base_environment

FINAL_STATUS = {
    Outcome.CANCELLED: ExecutionStatus.CANCELLED,
    Outcome.STALLED: ExecutionStatus.STALLED,
}


@dataclass(frozen=True)
class RunRequest:
    """One run of the loop on a directory that already holds the repository."""

    provider: str
    prompt: str
    workspace: Path
    model: str | None = None
    script: Path | dict[str, Any] | None = None
    limit_overrides: dict[str, Any] = field(default_factory=dict)
    node_config: dict[str, Any] = field(default_factory=dict)
    branch: str | None = None
    default_branch: str | None = None
    repository: str | None = None  # the key of the daily budget (default: the workspace path)
    repo_url: str | None = None


def final_status(result: RunResult) -> ExecutionStatus:
    """The execution status a run ends in."""
    if result.outcome in FINAL_STATUS:
        return FINAL_STATUS[result.outcome]
    return ExecutionStatus.SUCCEEDED if result.succeeded else ExecutionStatus.FAILED


def agent_limits(values: dict[str, Any]) -> AgentLimits:
    """The loop's limits from recorded or runtime settings (older records lack newer keys)."""
    defaults = AgentLimits()
    return AgentLimits(
        max_iterations=int(values["max_iterations"]),
        max_budget_usd=float(values["max_budget_usd"]),
        wall_clock_s=float(values["wall_clock_s"]), stall_s=float(values["stall_s"]),
        context_token_budget=int(values.get("context_token_budget",
                                            defaults.context_token_budget)),
    )


def _refused(execution_id: str, request: RunRequest, code: ErrorCode, message: str) -> RunResult:
    return RunResult(
        execution_id=execution_id, provider=request.provider, model=request.model or "",
        outcome=Outcome.ERROR, result=AgentResult(status=AgentStatus.FAILED, summary=message),
        usage=UsageTotals(), iterations=0, error={"code": code.value, "message": message},
    )


async def _drive(engine: ModelClient | SelfDrivingEngine, deps: AgentDeps, prompt: str,
                 history: list[Message] | None) -> RunResult:
    try:
        return await FrontierAgent(engine, deps).run(prompt, history=history)
    finally:
        if not isinstance(engine, SelfDrivingEngine):
            await engine.aclose()


@dataclass
class LoopWiring:
    """What differs between a plain run and a durable one; the rest is wired the same way."""

    store: IdempotencyStore
    journal: EventSink
    control: RunControl
    budget: BudgetPort
    limits: AgentLimits
    refresh_limits: Callable[[], AgentLimits] | None = None
    spent: UsageTotals | None = None


def run_loop(settings: StudioSettings, engine_request: EngineRequest, ctx: ToolDomainContext,
             wiring: LoopWiring, sinks: Sequence[EventSink], redactor: Redactor, prompt: str,
             history: list[Message] | None = None) -> RunResult:
    """Build the engine and the registry (MCP servers included) and run FrontierAgent once."""
    engine = build_engine(engine_request, settings)
    registry = default_registry()
    try:
        return _run_with(settings, engine, registry, ctx, wiring, sinks, redactor, prompt,
                         history)
    finally:
        if engine_request.transcript_dir is not None:
            redact_files(engine_request.transcript_dir, redactor)


def transcript_dir(settings: StudioSettings, execution_id: str) -> Path:
    """Where an execution's provider transcript is kept (the Claude Code session)."""
    return settings.data_dir / "transcripts" / execution_id


def redact_files(directory: Path, redactor: Redactor) -> None:
    """Known secrets out of every file kept under ``directory``."""
    for path in directory.rglob("*") if directory.exists() else []:
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            cleaned = redactor.text(text)
            if cleaned != text:
                path.write_text(cleaned, encoding="utf-8")


def _run_with(settings: StudioSettings, engine: ModelClient | SelfDrivingEngine,
              registry: ToolRegistry, ctx: ToolDomainContext, wiring: LoopWiring,
              sinks: Sequence[EventSink], redactor: Redactor, prompt: str,
              history: list[Message] | None) -> RunResult:
    with contextlib.ExitStack() as stack:
        if settings.mcp_config is not None:
            hub = stack.enter_context(McpHub.from_file(settings.mcp_config,
                                                       base_env=mcp_base_environment()))
            hub.register(registry)
        deps = AgentDeps(
            dispatcher=Dispatcher(registry, wiring.store), ctx=ctx,
            sink=FanOutSink([wiring.journal, *(RedactingSink(s, redactor) for s in [
                *sinks, LogSink(engine.provider, ctx.request_id, ctx.correlation_id)])]),
            limits=wiring.limits, control=wiring.control, budget=wiring.budget,
            refresh_limits=wiring.refresh_limits, spent=wiring.spent,
        )
        return anyio.run(_drive, engine, deps, prompt, history)


class RedactingSink:
    """Hands events on with every known secret replaced (live output is a log too)."""

    def __init__(self, sink: EventSink, redactor: Redactor | None = None) -> None:
        self.sink = sink
        self.redactor = redactor or Redactor.from_settings(get_settings())

    def emit(self, event: AgentEvent) -> None:
        self.sink.emit(replace(event, data=self.redactor.data(dict(event.data))))


class ExecutionService:
    """Runs recorded executions against one database."""

    def __init__(self, db: Database, settings: StudioSettings) -> None:
        self.db = db
        self.settings = settings
        self.executions = ExecutionRepository(db)
        self.runtime_settings = SettingsRepository(db)
        self.redactor = Redactor.from_settings(settings)

    def run(self, request: RunRequest, *, sinks: list[EventSink] | None = None) -> RunResult:
        """Record and run one execution to its end; the row always ends in a final status."""
        return self.execute(self.create(request), request, sinks=sinks)

    def create(self, request: RunRequest, *, flowchart_run_id: str | None = None,
               node_id: str | None = None) -> str:
        """Record a queued execution with the settings in force; answers its id."""
        snapshot = self.runtime_settings.snapshot({**request.node_config,
                                                   **request.limit_overrides})
        return self.executions.create(
            flowchart_run_id=flowchart_run_id, node_id=node_id,
            provider=request.provider,
            model=request.model or DEFAULT_MODELS.get(request.provider, ""),
            prompt=request.prompt, repo_url=request.repo_url, workspace=str(request.workspace),
            branch=request.branch, limits=snapshot["limits"], settings_snapshot=snapshot,
        )

    def execute(self, execution_id: str, request: RunRequest, *,
                sinks: list[EventSink] | None = None) -> RunResult:
        """Run a recorded execution (its settings as recorded at creation) to its end."""
        row = self.executions.get(execution_id)
        if row is None:
            raise UnknownExecution(execution_id)
        snapshot = row.settings_snapshot
        if not snapshot["agent_runtime_cutover_enabled"]["value"]:
            return self._end(_refused(execution_id, request, ErrorCode.UNSUPPORTED_CAPABILITY,
                                      "agent runtime cutover is off and the legacy runtime "
                                      "does not exist yet"))
        self.executions.mark_running(execution_id, branch=request.branch)
        try:
            result = self._run(execution_id, request, snapshot["limits"], sinks or [])
        except ConfigError as exc:
            self._end(_refused(execution_id, request, exc.code, exc.message))
            raise
        return self._end(result)

    def _end(self, result: RunResult) -> RunResult:
        error = result.error or {}
        self.executions.finish(
            result.execution_id, status=final_status(result), outcome=result.outcome.value,
            result=result.result.model_dump(mode="json"),
            usage=result.usage.model_dump(mode="json"), cost_usd=result.usage.cost_usd,
            iterations=result.iterations, error_code=error.get("code"),
            error_message=error.get("message"),
        )
        return result

    def _run(self, execution_id: str, request: RunRequest, limits: dict[str, Any],
             sinks: list[EventSink]) -> RunResult:
        run_dir = Path(tempfile.mkdtemp(prefix=f"studio-run-{execution_id[:8]}-"))
        ctx = ToolDomainContext(
            workspace_root=request.workspace, execution_id=execution_id,
            request_id=str(uuid.uuid4()), correlation_id=execution_id,
            sandbox=command_sandbox(self.settings), branch=request.branch,
            default_branch=request.default_branch,
            git_author_name=self.settings.git_author_name,
            git_author_email=self.settings.git_author_email,
        )
        repository = request.repository or request.repo_url or str(request.workspace.resolve())
        overrides = {**request.node_config, **request.limit_overrides}
        wiring = LoopWiring(
            store=DbIdempotencyStore(self.db), journal=DbEventSink(self.db, self.redactor),
            control=DbRunControl(self.db, execution_id),
            budget=DbBudget(self.db, execution_id, repository,
                            float(limits["repo_daily_budget_usd"])),
            limits=agent_limits(limits),
            refresh_limits=lambda: agent_limits(self.runtime_settings.limits(overrides)),
        )
        try:
            return run_loop(self.settings, EngineRequest(
                provider=request.provider, model=request.model, workspace=request.workspace,
                run_dir=run_dir, script=request.script,
                transcript_dir=transcript_dir(self.settings, execution_id)),
                ctx, wiring, sinks, self.redactor,
                request.prompt)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
