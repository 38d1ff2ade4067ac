"""What the tasks hand off to: plain functions, callable without Celery (tests, eager mode).

:func:`handle_execute_node` admits a delivery (see :mod:`~services.worker.admission`) and runs
the execution in a child process; it returns the decision and never raises for an execution
that failed (the execution row records that; a Celery retry would only run it again).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, open_database
from services.db.team_admission import hold_if_over
from services.execution.agent_profile import AgentProfile
from services.executors.base import SubstrateStatus
from services.runs.agent_setup import may_use_mcp
from services.runs.leases import LeaseTimings
from services.runs.reaper import reap, wake_waiting
from services.settings import StudioSettings
from services.worker.admission import Admission, admit
from services.worker.child import run_child
from services.worker.payloads import ExecuteNodePayload
from services.worker.task_database import worker_database

log = logging.getLogger(__name__)

Launch = Callable[[str], SubstrateStatus]


def handle_execute_node(payload: ExecuteNodePayload, settings: StudioSettings, *,
                        launch: Launch | None = None,
                        dispatch: Callable[[str], Any] | None = None) -> Admission:
    """Run the execution unless it is unknown, finished, held by a live lease, or its team is
    at its concurrency limit (it waits, queued: :mod:`services.db.team_admission`). The task
    opens the database once (a thread-pool worker's tasks borrow the worker's instead:
    :mod:`services.worker.task_database`); what it launches (by default :func:`run_child`)
    borrows it. Once it ended, the executions of any team now under its limit go to
    ``dispatch``."""
    execution_id = str(payload.execution_id)
    shared = worker_database()
    db = shared or open_database(settings)
    try:
        row = ExecutionRepository(db).get(execution_id)
        decision = admit(row)
        if decision is Admission.RUN and hold_if_over(db, execution_id):
            decision = Admission.TEAM_CONCURRENCY
        if decision is not Admission.RUN:
            log.info("worker: execution %s not started (%s)", execution_id, decision.value)
            return decision
        # what the fork server loads for it, once (a provider's SDK, the MCP client)
        provider = row.provider if row is not None else None
        mcp = row is not None and _may_use_mcp(row, settings)
        status = (launch or partial(run_child, db=db, provider=provider, mcp=mcp))(execution_id)
        if dispatch is not None:
            wake_waiting(db, dispatch)
    finally:
        if shared is None:
            db.dispose()
    log.info("worker: execution %s: studio execute ended %s", execution_id, status.value)
    return decision


def _may_use_mcp(row: NodeExecution, settings: StudioSettings) -> bool:
    try:
        profile = AgentProfile.from_stored((row.request or {}).get("profile"))
    except (KeyError, TypeError, ValueError, AttributeError):  # the run refuses it itself
        return False
    return may_use_mcp(settings, profile)


def reap_once(db: Database, settings: StudioSettings, dispatch: Callable[[str], Any],
              dispatch_node: Callable[[str, str], Any] | None = None) -> list[str]:
    """One reaper pass: each execution whose lease expired is handed to ``dispatch`` (a paused
    flowchart node's to ``dispatch_node``); orphaned workspace directories are deleted; then
    the triggers' pass (:func:`services.triggers.settle.settle`: slots released, pending and
    deferred work started). Answers the ids dispatched."""
    reaped = reap(db, settings, dispatch, dispatch_node)
    from services.triggers.settle import settle

    return reaped + settle(db, settings, dispatch)


def reaper_interval_s(db: Database) -> float:
    """The runtime setting ``reaper_interval_s``, read fresh each time."""
    return LeaseTimings.from_db(db).reaper_interval_s
