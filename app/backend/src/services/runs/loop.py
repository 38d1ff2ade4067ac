"""The loop's inputs, built the same way for every execution, and one run of FrontierAgent.

:class:`LoopWiring` is what differs between an execution run in place and a leased one (the
tool-call store, the journal, the run control, what earlier attempts spent);
:meth:`LoopWiring.build` adds what does not (the daily budget of the repository, the limits as
recorded, refreshed from the runtime settings). :func:`run_loop` builds the engine in a scratch
directory of its own, the tool registry (MCP servers included) and the sinks, and runs the loop
once. A buffered journal (:class:`~services.db.journal.DbEventSink`) hands each event to the
other sinks once it is committed, and is flushed (its connection given back) when the loop ends,
however it ends.

In a process that keeps its start-up heap (the ``studio`` program freezes it:
:func:`services.cli.main.main`), what the first loop's setup built (the engine, the provider's
SDK client, the modules imported on the way, the database's tables and statements) is frozen too
before the loop starts (:func:`keep_setup_heap`): a full collection during the loop then walks
what the loop itself allocates, not the hundred thousand objects that live as long as the
process (a full collection cost 60 ms, one in about 50 steps).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from services.composition import EngineRequest, build_engine
from services.db.budget import DbBudget
from services.db.journal import DbEventSink
from services.db.mcp_servers import secret_values
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.agent_profile import AgentProfile, ModelChoice
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.approvals import ApprovalGate
from services.execution.fallback import ModelPlan, model_plan
from services.execution.guards import AgentLimits
from services.execution.mcp.config import McpConfig
from services.execution.messages import Message
from services.execution.outcomes import RunResult, UsageTotals
from services.execution.ports import (
    AgentEvent,
    AgentEventKind,
    BudgetPort,
    EventSink,
    IdempotencyStore,
    ModelClient,
    RunControl,
    SelfDrivingEngine,
)
from services.execution.pricing import PriceTable
from services.execution.roles import restrict, role_prompt
from services.execution.sinks import FanOutSink, LogSink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.registry import default_registry
from services.runs.agent_setup import agent_mcp_config
from services.runs.file_redaction import redact_tree
from services.runs.mcp_confinement import confinement, report_failures
from services.settings import (
    StudioSettings,
    capture_message_content,
    mcp_base_environment,
)


def agent_limits(values: dict[str, Any]) -> AgentLimits:
    """The loop's limits from recorded or runtime settings (older records lack newer keys)."""
    defaults = AgentLimits()
    return AgentLimits(
        max_iterations=int(values["max_iterations"]),
        max_budget_usd=float(values["max_budget_usd"]),
        wall_clock_s=float(values["wall_clock_s"]), stall_s=float(values["stall_s"]),
        context_token_budget=int(values.get("context_token_budget",
                                            defaults.context_token_budget)),
        compaction_enabled=bool(values.get("compaction_enabled", defaults.compaction_enabled)),
        context_window_tokens=int(values.get("context_window_tokens",
                                             defaults.context_window_tokens)),
        context_high_mark=float(values.get("context_high_mark", defaults.context_high_mark)),
        context_low_mark=float(values.get("context_low_mark", defaults.context_low_mark)),
        context_keep_turns=int(values.get("context_keep_turns", defaults.context_keep_turns)),
    )


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
    gate: ApprovalGate | None = None  # the approval policy (services.runs.approvals)
    resume_pending: bool = False  # the last attempt paused for an approval mid-batch

    @classmethod
    def build(cls, db: Database, execution_id: str, repository: str, limits: dict[str, Any],
              overrides: dict[str, Any], *, store: IdempotencyStore, journal: EventSink,
              control: RunControl, spent: UsageTotals | None = None,
              reads: StepReads | None = None) -> LoopWiring:
        """The wiring with the repository's daily budget and the recorded ``limits``, refreshed
        before every call from the runtime settings under the execution's ``overrides``.

        ``reads``: the execution's shared read before each call (its run control's too, so
        that one statement answers the control, the limits and the budget)."""
        settings_repo = SettingsRepository(db)

        def refresh() -> AgentLimits:
            stored = reads.read("limits").settings if reads is not None else None
            return agent_limits(settings_repo.limits(overrides, stored=stored))

        return cls(
            store=store, journal=journal, control=control,
            budget=DbBudget(db, execution_id, repository,
                            float(limits["repo_daily_budget_usd"]),
                            journal=journal if isinstance(journal, DbEventSink) else None,
                            reads=reads),
            limits=agent_limits(limits), refresh_limits=refresh, spent=spent,
        )


@dataclass(frozen=True)
class LoopInputs:
    """What the engine is built from and what it is asked: one attempt of one execution."""

    execution_id: str
    provider: str
    model: str | None
    workspace: Path
    prompt: str
    script: Path | dict[str, Any] | None = None
    history: list[Message] | None = None
    trace_links: tuple[str, ...] = ()  # earlier attempts' agent spans (services.telemetry)
    profile: AgentProfile = AgentProfile()  # role, system prompt, MCP servers, models
    mcp: McpConfig | None = None  # the stored MCP servers the profile names, decrypted
    events: tuple[tuple[str, dict[str, Any]], ...] = ()  # the journal so far (a resume)
    output_schema: dict[str, Any] | None = None  # the final answer's JSON schema (a review)


def run_loop(settings: StudioSettings, inputs: LoopInputs, ctx: ToolDomainContext,
             wiring: LoopWiring, sinks: Sequence[EventSink], redactor: Redactor) -> RunResult:
    """Build the engine (in a scratch directory removed afterwards) and the registry (MCP
    servers included) and run FrontierAgent once; the transcript kept is redacted."""
    run_dir = Path(tempfile.mkdtemp(prefix=f"studio-run-{inputs.execution_id[:8]}-"))
    transcripts = transcript_dir(settings, inputs.execution_id)
    try:
        def build(choice: ModelChoice) -> ModelClient | SelfDrivingEngine:
            return build_engine(EngineRequest(
                provider=choice.provider, model=choice.model, workspace=inputs.workspace,
                run_dir=run_dir, script=inputs.script, transcript_dir=transcripts,
                output_schema=inputs.output_schema), settings)

        chain = inputs.profile.chain(inputs.provider, inputs.model)
        plan = model_plan(chain, inputs.events, build)
        engine = build(plan.first)
        try:
            return _run_with(settings, engine, default_registry(), ctx, wiring, sinks,
                             redactor, inputs, plan)
        finally:
            redact_files(transcripts, redactor)
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)


def transcript_dir(settings: StudioSettings, execution_id: str) -> Path:
    """Where an execution's provider transcript is kept (the Claude Code session)."""
    return settings.data_dir / "transcripts" / execution_id


def redact_files(directory: Path, redactor: Redactor) -> None:
    """Known secrets out of every file kept under ``directory``, never following a link out of
    it (:func:`services.runs.file_redaction.redact_tree`)."""
    redact_tree(directory, redactor)


async def _drive(engine: ModelClient | SelfDrivingEngine, deps: AgentDeps, prompt: str,
                 history: list[Message] | None) -> RunResult:
    agent: FrontierAgent | None = None
    try:
        agent = FrontierAgent(engine, deps)
        return await agent.run(prompt, history=history)
    finally:
        current = agent.engine if agent is not None else engine  # the last model in use
        if not isinstance(current, SelfDrivingEngine):
            await current.aclose()


def _run_with(settings: StudioSettings, engine: ModelClient | SelfDrivingEngine,
              registry: ToolRegistry, ctx: ToolDomainContext, wiring: LoopWiring,
              sinks: Sequence[EventSink], redactor: Redactor, inputs: LoopInputs,
              plan: ModelPlan | None = None) -> RunResult:
    with contextlib.ExitStack() as stack:
        cycles = LastCycle()
        # One redaction per event for every sink shown (not one per sink).
        shown_raw = FanOutSink([
            *sinks, LogSink(engine.provider, ctx.request_id, ctx.correlation_id)])
        shown: list[EventSink] = [RedactingSink(shown_raw, redactor)]
        journal = wiring.journal
        if isinstance(journal, DbEventSink):  # buffered: shown once committed
            # with the data it stored, redacted already when it is by the same redactor
            journal.forward_to([shown_raw] if journal.redactor is redactor else shown)
            sink: EventSink = FanOutSink([cycles, journal])
        else:
            sink = FanOutSink([cycles, journal, *shown])
        mcp = agent_mcp_config(settings, inputs.mcp)
        if mcp is not None:
            try:
                _add_mcp(stack, settings, mcp, inputs, ctx, registry, sink, redactor)
            except BaseException:
                if isinstance(journal, DbEventSink):  # the failure's events are kept
                    with contextlib.suppress(Exception):
                        journal.close()
                raise
        registry = restrict(registry, inputs.profile.role)
        ctx = stack.enter_context(execution_sandbox(ctx, sink, cycles))
        deps = AgentDeps(
            dispatcher=Dispatcher(registry, wiring.store), ctx=ctx, sink=sink,
            limits=wiring.limits, control=wiring.control, budget=wiring.budget,
            refresh_limits=wiring.refresh_limits, spent=wiring.spent,
            trace_links=inputs.trace_links,
            trace_content=redactor.text if capture_message_content() else None,
            prices=PriceTable(settings.model_prices),
            role_prompt=role_prompt(inputs.profile.role),
            node_prompt=inputs.profile.system_prompt,
            fallback=plan.fallback if plan is not None else None,
            gate=wiring.gate, resume_pending=wiring.resume_pending,
        )
        keep_setup_heap()
        try:
            run = anyio.run(_drive, engine, deps, inputs.prompt, inputs.history)
        except BaseException:
            if isinstance(journal, DbEventSink):  # what happened before the failure is kept
                with contextlib.suppress(Exception):
                    journal.close()
            raise
        if isinstance(journal, DbEventSink):
            journal.close()
        return run


_startup_heap_frozen = False


def startup_heap_frozen() -> None:
    """Note that this process froze its start-up heap (the worker's fork server does, before
    it forks: :mod:`services.cli.fork_server`), so that :func:`keep_setup_heap` need not count
    the frozen objects to find out: :func:`gc.get_freeze_count` walks every one of them (about
    125,000 in a forked ``studio execute``, 13 to 20 ms of CPU per execution)."""
    global _startup_heap_frozen
    _startup_heap_frozen = True


def keep_setup_heap() -> None:
    """Freeze the heap (:func:`gc.freeze`) before a loop starts, once per process, and only in a
    process that already froze its start-up heap (the ``studio`` program; a test process, or
    any process that did not ask for it, is left alone). Once: a later freeze would also keep
    whatever garbage waits for a collection at that moment, for the life of the process (an
    evaluation runs many loops in one process). A process that said so
    (:func:`startup_heap_frozen`) is not asked again."""
    if _startup_heap_frozen or gc.get_freeze_count() > 0:
        _freeze_once()


@functools.cache
def _freeze_once() -> None:
    gc.freeze()


def _add_mcp(stack: contextlib.ExitStack, settings: StudioSettings, mcp: McpConfig,
             inputs: LoopInputs, ctx: ToolDomainContext, registry: ToolRegistry,
             sink: EventSink, redactor: Redactor) -> None:
    """Start the MCP servers (the stored ones confined) and offer their tools; a server that
    did not start is an event, and the run's error when it is required."""
    for value in secret_values(mcp):  # env and headers of every server in use
        redactor.add(value)
    # The MCP client (about 0.4 s of imports) only when MCP servers are configured.
    from services.execution.mcp.bridge import McpHub

    stored = list(inputs.mcp.servers) if inputs.mcp is not None else []
    launchers, checks = confinement(settings, mcp, stored, ctx.workspace_root)
    hub = stack.enter_context(McpHub(mcp, base_env=mcp_base_environment(),
                                     launchers=launchers, address_checks=checks))
    report_failures(hub.failures, mcp, sink, ctx.execution_id, 0, redactor)
    hub.register(registry)


class LastCycle:
    """Remembers the cycle of the last event, for events raised outside the loop's own code."""

    def __init__(self) -> None:
        self.cycle = 0

    def emit(self, event: AgentEvent) -> None:
        self.cycle = event.cycle


@contextlib.contextmanager
def execution_sandbox(ctx: ToolDomainContext, sink: EventSink,
                      cycles: LastCycle) -> Iterator[ToolDomainContext]:
    """``ctx`` with the execution's own sandbox (one for all its commands under bubblewrap),
    closed when the loop ends, however it ends; a sandbox started again is journaled as a
    ``warning`` event."""
    if ctx.sandbox is None:
        yield ctx
        return

    def notify(code: str, message: str) -> None:
        sink.emit(AgentEvent(kind=AgentEventKind.WARNING, execution_id=ctx.execution_id,
                             cycle=cycles.cycle, data={"code": code, "message": message}))

    with ctx.sandbox.session(ctx.workspace_root, notify) as sandbox:
        yield replace(ctx, sandbox=sandbox)


class RedactingSink:
    """Hands events on with every known secret replaced (live output is a log too)."""

    def __init__(self, sink: EventSink, redactor: Redactor) -> None:
        self.sink = sink
        self.redactor = redactor

    def emit(self, event: AgentEvent) -> None:
        self.sink.emit(replace(event, data=self.redactor.data(dict(event.data))))
