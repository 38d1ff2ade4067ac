"""The one entry point of an execution: record it, run FrontierAgent on it, finish it.

:class:`ExecutionService` takes one :class:`~services.runs.request.ExecutionRequest`. A repository
request (``repo_url``) goes through the durable path
(:func:`services.runs.durable.execute_execution`: lease, clone, loop, commit, push, pull request);
a ``workspace`` request runs the loop in that directory, without clone or finalization. Either way
every run is an execution row; its events go to the journal (durable before they are shown), its
tool calls are keyed in the database (a resumed run never repeats one), the kill switch and
cancellation are read fresh before every model and tool call, and the repository's daily budget is
enforced across processes. Cutover off answers ``unsupported_capability`` until the legacy runtime
exists (:func:`services.runs.results.cutover_refusal`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.composition import command_sandbox
from services.db.control import DbRunControl
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.errors import ConfigError
from services.execution.outcomes import RunResult
from services.execution.ports import EventSink
from services.execution.tool_domains.context import ToolDomainContext
from services.runs.agent_setup import stored_mcp
from services.runs.approvals import approval_gate
from services.runs.durable import execute_execution
from services.runs.legacy_agent import legacy_profile_refusal
from services.runs.legacy_runtime import LEGACY_RUNTIME, run_legacy, runtime_choice
from services.runs.loop import LoopInputs, LoopWiring, run_loop
from services.runs.request import ExecutionRequest, create_execution
from services.runs.results import (
    ExecutionOutcome,
    cutover_refusal,
    end_fields,
    failed_run,
    final_status,
)
from services.settings import StudioSettings


class ExecutionService:
    """Records and runs executions against one database."""

    def __init__(self, db: Database, settings: StudioSettings) -> None:
        self.db = db
        self.settings = settings
        self.redactor = Redactor.from_settings(settings)
        self.executions = ExecutionRepository(db, self.redactor)

    def run(self, request: ExecutionRequest, *, sinks: Sequence[EventSink] = (),
            keep_workspace: bool = False) -> ExecutionOutcome:
        """Record and run one execution to its end; the row always ends in a final status."""
        return self.execute(self.create(request), request, sinks=sinks,
                            keep_workspace=keep_workspace)

    def create(self, request: ExecutionRequest, *, flowchart_run_id: str | None = None,
               node_id: str | None = None) -> str:
        """Record a queued execution with the settings in force; answers its id."""
        return create_execution(self.db, request, self.redactor, settings=self.settings,
                                flowchart_run_id=flowchart_run_id, node_id=node_id)

    def execute(self, execution_id: str, request: ExecutionRequest, *,
                sinks: Sequence[EventSink] = (), keep_workspace: bool = False
                ) -> ExecutionOutcome:
        """Run a recorded execution (its settings as recorded at creation) to its end: cloned
        and finalized for a repository request, in its directory otherwise."""
        if request.repo_url is not None:
            return execute_execution(execution_id, settings=self.settings, db=self.db,
                                     sinks=sinks, keep_workspace=keep_workspace)
        result = self._in_place(execution_id, request, sinks)
        return ExecutionOutcome(execution_id, "ran", final_status(result), result)

    def _in_place(self, execution_id: str, request: ExecutionRequest,
                  sinks: Sequence[EventSink]) -> RunResult:
        row = self.executions.get(execution_id)
        if row is None:
            raise UnknownExecution(execution_id)
        refusal = cutover_refusal(row.settings_snapshot, request.provider) \
            or legacy_profile_refusal(row.settings_snapshot, request.profile)
        if refusal is not None:
            return self._end(failed_run(execution_id, request.provider, request.model or "",
                                        refusal.code, refusal.message))
        self.executions.mark_running(execution_id)
        try:
            result = self._loop(execution_id, request, row.settings_snapshot, sinks)
        except ConfigError as exc:
            self._end(failed_run(execution_id, request.provider, request.model or "",
                                 exc.code, exc.message))
            raise
        return self._end(result)

    def _end(self, result: RunResult) -> RunResult:
        self.executions.finish(result.execution_id, **end_fields(result, self.redactor))
        return result

    def _loop(self, execution_id: str, request: ExecutionRequest, snapshot: dict[str, Any],
              sinks: Sequence[EventSink]) -> RunResult:
        limits = snapshot["limits"]
        workspace = request.workspace
        assert workspace is not None  # a request without a repository names its directory
        ctx = ToolDomainContext(
            workspace_root=workspace, execution_id=execution_id,
            request_id=str(uuid.uuid4()), correlation_id=execution_id,
            sandbox=command_sandbox(self.settings),
            git_author_name=self.settings.git_author_name,
            git_author_email=self.settings.git_author_email,
        )
        legacy = runtime_choice(snapshot).runtime == LEGACY_RUNTIME
        # the loop's journal commits at the points resume needs and is flushed by the loop;
        # the legacy runtime writes each event as it comes
        journal = DbEventSink(self.db, self.redactor, buffered=not legacy)
        reads = StepReads(self.db, execution_id, request.budget_key)
        wiring = LoopWiring.build(
            self.db, execution_id, request.budget_key, limits,
            {**request.node_config, **request.limit_overrides},
            # MCP secrets join the redactor below; a call's record rides the journal's commit
            store=DbIdempotencyStore(self.db, self.redactor,
                                     journal=journal if not legacy else None),
            journal=journal, control=DbRunControl(self.db, execution_id, reads=reads),
            reads=reads)
        # in place there is no resume to wait for: ``require`` is refused like ``deny``
        wiring.gate = approval_gate(self.db, self.settings, execution_id,
                                    request.approval_policy, self.redactor, can_wait=False)
        inputs = LoopInputs(execution_id, request.provider, request.model, Path(workspace),
                            request.prompt, request.script, profile=request.profile,
                            mcp=stored_mcp(self.db, self.settings, request.profile,
                                           self.redactor))
        if legacy:
            return run_legacy(self.settings, inputs, ctx, wiring, sinks, self.redactor)
        return run_loop(self.settings, inputs, ctx, wiring, sinks, self.redactor)
