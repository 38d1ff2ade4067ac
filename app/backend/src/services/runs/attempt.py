"""One attempt at an execution, built the same way in place and in a clone.

:class:`AttemptScope` is what an attempt runs in: the database, the execution id, the redactor
(the secrets the attempt learns join it), the lease epoch that fences its writes (``None`` in
place, where no lease is held), the settings and the live sinks. Both paths build their tool
context (:meth:`AttemptScope.tool_context`), their loop wiring (:meth:`AttemptScope.wiring`) and
run the loop or the legacy runtime (:meth:`AttemptScope.run`) through it; what differs is passed
in: the workspace's place (branch, git auth, disk check), the tool-call store (keyed records in
place, checkpointing in a clone), the run control's guards (the lease, the disk) and whether a
call may wait for an approval (only a durable attempt can resume after one).

The in-place path is :meth:`services.runs.service.ExecutionService.execute` for a ``workspace``
request; the cloned one is :class:`services.runs.durable.DurableRun`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.composition import command_sandbox
from services.db import team_alerts
from services.db.control import DbRunControl
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.errors import ExecutionError
from services.execution.mcp.config import McpConfig
from services.execution.outcomes import RunResult, UsageTotals
from services.execution.ports import (
    AgentEvent,
    AgentEventKind,
    EventSink,
    IdempotencyStore,
    RunControl,
)
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.git.runner import GitAuthor
from services.runs.agent_setup import stored_mcp
from services.runs.approvals import approval_gate
from services.runs.legacy_agent import legacy_profile_refusal
from services.runs.loop import LoopInputs, LoopWiring, run_loop
from services.runs.request import ExecutionRequest
from services.runs.results import cutover_refusal
from services.runs.runtime_choice import LEGACY_RUNTIME, runtime_choice
from services.settings import StudioSettings

StoreFor = Callable[[DbEventSink | None], IdempotencyStore]
"""The attempt's tool-call store, given the journal whose commit its records ride (``None``:
the legacy runtime, whose journal writes each event as it comes)."""


def refusal(snapshot: dict[str, Any], request: ExecutionRequest) -> ExecutionError | None:
    """Why the recorded settings refuse the run before it starts (the cutover off for a provider
    without an agent CLI, or an agent profile the legacy runtime cannot honour), else ``None``."""
    return cutover_refusal(snapshot, request.provider) \
        or legacy_profile_refusal(snapshot, request.profile)


def is_legacy(snapshot: dict[str, Any]) -> bool:
    """Whether the recorded settings run the provider's own agent CLI instead of the loop."""
    return runtime_choice(snapshot).runtime == LEGACY_RUNTIME


def _unguarded(control: RunControl) -> RunControl:
    return control


@dataclass
class AttemptScope:
    """What one attempt runs in (see the module docstring)."""

    db: Database
    settings: StudioSettings
    execution_id: str
    redactor: Redactor
    lease_epoch: int | None = None
    sinks: Sequence[EventSink] = field(default_factory=tuple)

    @property
    def author(self) -> GitAuthor:
        return GitAuthor(self.settings.git_author_name, self.settings.git_author_email)

    def journal(self, *, buffered: bool = False) -> DbEventSink:
        """The execution's journal, fenced by the lease epoch when there is one."""
        return DbEventSink(self.db, self.redactor, lease_epoch=self.lease_epoch,
                           buffered=buffered)

    def emit(self, kind: AgentEventKind, data: dict[str, Any]) -> None:
        """One event outside the loop (setup, network, a finalization step): journaled, then
        sent to the live sinks."""
        event = AgentEvent(kind, self.execution_id, 0, self.redactor.data(data))
        self.journal().emit(event)
        for sink in self.sinks:
            sink.emit(event)

    def tool_context(self, workspace: Path, **place: Any) -> ToolDomainContext:
        """The tools' context in ``workspace``; ``place``: what a clone adds (branch, git auth,
        pull requests, disk check)."""
        return ToolDomainContext(
            workspace_root=workspace, execution_id=self.execution_id,
            request_id=str(uuid.uuid4()), correlation_id=self.execution_id,
            sandbox=command_sandbox(self.settings),
            git_author_name=self.settings.git_author_name,
            git_author_email=self.settings.git_author_email, **place)

    def wiring(self, request: ExecutionRequest, limits: dict[str, Any], *, legacy: bool,
               store: StoreFor, guard: Callable[[RunControl], RunControl] = _unguarded,
               spent: UsageTotals | None = None, can_wait: bool = True) -> LoopWiring:
        """The loop's wiring: the loop's journal commits at the points resume needs (the loop
        flushes it when it ends), the legacy runtime's writes each event as it comes; one
        shared read before each call answers the run control, the limits and the budget."""
        journal = self.journal(buffered=not legacy)
        team_alerts.install(self.db, self.settings)  # the team budget's alerts, sent aside
        reads = StepReads(self.db, self.execution_id, request.budget_key)
        if not legacy:  # the commit a model call follows reads what its checks read
            journal.read_with(reads)
        control = DbRunControl(self.db, self.execution_id, reads=reads)
        wiring = LoopWiring.build(
            self.db, self.execution_id, request.budget_key, limits,
            {**request.node_config, **request.limit_overrides},
            store=store(None if legacy else journal), journal=journal, control=guard(control),
            spent=spent, reads=reads)
        wiring.gate = approval_gate(self.db, self.settings, self.execution_id,
                                    request.approval_policy, self.redactor, can_wait=can_wait)
        return wiring

    def mcp(self, request: ExecutionRequest) -> McpConfig | None:
        """The stored MCP servers the agent names, decrypted (their secrets join the
        redactor)."""
        return stored_mcp(self.db, self.settings, request.profile, self.redactor)

    def run(self, inputs: LoopInputs, ctx: ToolDomainContext, wiring: LoopWiring, *,
            legacy: bool) -> RunResult:
        """Run the loop once, or the provider's agent CLI on the legacy runtime (imported for
        a legacy run only: its adapters and relays are no part of a loop run's start)."""
        if legacy:
            from services.runs.legacy_runtime import run_legacy

            return run_legacy(self.settings, inputs, ctx, wiring, self.sinks, self.redactor)
        return run_loop(self.settings, inputs, ctx, wiring, self.sinks, self.redactor)
