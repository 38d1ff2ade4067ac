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

import getpass
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.idempotency import DbIdempotencyStore
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.errors import ConfigError
from services.execution.outcomes import RunResult
from services.execution.ports import EventSink
from services.runs.attempt import AttemptScope, is_legacy, refusal
from services.runs.durable import execute_execution
from services.runs.leases import LapseHandler
from services.runs.loop import LoopInputs
from services.runs.request import ExecutionRequest, create_execution
from services.runs.results import (
    ExecutionOutcome,
    end_fields,
    failed_run,
    final_status,
)
from services.settings import StudioSettings


def local_user() -> str:
    """``cli:<user>``: who created an execution from the command line."""
    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli:unknown"


class ExecutionService:
    """Records and runs executions against one database."""

    def __init__(self, db: Database, settings: StudioSettings, *,
                 team_id: str | None = None) -> None:
        self.db = db
        self.settings = settings
        self.team_id = team_id  # the team its executions belong to (None: by repository)
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
                                flowchart_run_id=flowchart_run_id, node_id=node_id,
                                team_id=self.team_id, created_by=(None, local_user()))

    def execute(self, execution_id: str, request: ExecutionRequest, *,
                sinks: Sequence[EventSink] = (), keep_workspace: bool = False
                ) -> ExecutionOutcome:
        """Run a recorded execution (its settings as recorded at creation) to its end: cloned
        and finalized for a repository request, in its directory otherwise."""
        if request.repo_url is not None:
            return self.execute_recorded(execution_id, sinks=sinks,
                                         keep_workspace=keep_workspace)
        result = self._in_place(execution_id, request, sinks)
        return ExecutionOutcome(execution_id, "ran", final_status(result), result)

    def execute_recorded(self, execution_id: str, *, sinks: Sequence[EventSink] = (),
                         keep_workspace: bool = False, on_lapse: LapseHandler | None = None
                         ) -> ExecutionOutcome:
        """Claim, run (or resume) and finalize a recorded repository execution: the durable
        path (:func:`services.runs.durable.execute_execution`), what ``studio execute`` and
        ``studio demo`` run, wherever they run (a worker's child, a Kubernetes Job)."""
        return execute_execution(execution_id, settings=self.settings, db=self.db,
                                 sinks=sinks, keep_workspace=keep_workspace, on_lapse=on_lapse)

    def _in_place(self, execution_id: str, request: ExecutionRequest,
                  sinks: Sequence[EventSink]) -> RunResult:
        row = self.executions.get(execution_id)
        if row is None:
            raise UnknownExecution(execution_id)
        refused = refusal(row.settings_snapshot, request)
        if refused is not None:
            return self._end(failed_run(execution_id, request.provider, request.model or "",
                                        refused.code, refused.message))
        self.executions.mark_running(execution_id)
        try:
            result = self._loop(AttemptScope(self.db, self.settings, execution_id,
                                             self.redactor, sinks=sinks),
                                request, row.settings_snapshot)
        except ConfigError as exc:
            self._end(failed_run(execution_id, request.provider, request.model or "",
                                 exc.code, exc.message))
            raise
        return self._end(result)

    def _end(self, result: RunResult) -> RunResult:
        self.executions.finish(result.execution_id, **end_fields(result, self.redactor))
        return result

    def _loop(self, scope: AttemptScope, request: ExecutionRequest,
              snapshot: dict[str, Any]) -> RunResult:
        workspace = request.workspace
        assert workspace is not None  # a request without a repository names its directory
        ctx = scope.tool_context(workspace)
        legacy = is_legacy(snapshot)
        # in place there is no resume to wait for: ``require`` is refused like ``deny``; a
        # call's record rides the journal's commit
        wiring = scope.wiring(request, snapshot["limits"], legacy=legacy, can_wait=False,
                              store=lambda journal: DbIdempotencyStore(
                                  self.db, self.redactor, journal=journal))
        # MCP secrets join the redactor the store and the journal share
        inputs = LoopInputs(scope.execution_id, request.provider, request.model,
                            Path(workspace), request.prompt, request.script,
                            profile=request.profile, mcp=scope.mcp(request))
        return scope.run(inputs, ctx, wiring, legacy=legacy)
