"""Handing executions created through the API to whoever runs them.

Every execution takes the durable path (:mod:`services.runs.durable`): the API records it with
:func:`services.runs.request.create_execution` and hands its id to the injected
:class:`~services.api.dispatch.WorkDispatch` (the worker's dispatcher, in ``studio api``). With a
broker that sends the Celery task and returns at once. With no broker configured the API process
runs the execution itself, in the background: a bounded pool of threads, each waiting on a
``studio execute`` child (more executions wait their turn, ``queued``). Afterwards the journal is
checked: an execution whose child died before the loop could write ``finished`` (a clone that
failed, say) is marked failed and gets its ``finished`` event here, so live streams always end
(one the kill switch paused is left queued: it resumes once the switch is released).
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from services.api.dispatch import WorkDispatch
from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.status import FINAL_STATUSES, ExecutionStatus
from services.execution.errors import ErrorCode
from services.execution.ports import AgentEvent, AgentEventKind

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 2


class Launcher(Protocol):
    def launch(self, execution_id: str) -> None: ...

    def shutdown(self) -> None: ...


class DispatchLauncher:
    """Dispatches to the broker when there is one, else runs in ``concurrency`` threads."""

    def __init__(self, db: Database, dispatch: WorkDispatch,
                 concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self._db = db
        self._dispatch = dispatch
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix="studio-run")
        # called when a run here ends (the API's approval clock looks again: the execution may
        # wait for an approval now, services.api.approval_clock)
        self.after_run: Callable[[], None] | None = None

    def launch(self, execution_id: str) -> None:
        if self._dispatch.brokered:
            self._dispatch.execution(execution_id)
            return
        # the caller's context (its trace span) goes with the run: its child is traced under it
        context = contextvars.copy_context()
        future = self._pool.submit(context.run, run_here, self._db, self._dispatch.execution,
                                   execution_id)
        future.add_done_callback(_log_failure)
        future.add_done_callback(lambda _done: self.after_run() if self.after_run else None)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("background execution failed", exc_info=exc)


def run_here(db: Database, run: Callable[[str], object], execution_id: str) -> None:
    """Run the execution in this process (its ``studio execute`` child); it always ends,
    unless it waits for an approval (or was decided and queued again meanwhile: a later run
    carries it on)."""
    before = ExecutionRepository(db).get(execution_id)
    epoch = before.lease_epoch if before is not None else 0
    try:
        run(execution_id)
    finally:
        if _fail_unfinished(db, execution_id, epoch):
            _ensure_finished_event(db, execution_id)


def _fail_unfinished(db: Database, execution_id: str, epoch_before: int = 0) -> bool:
    """Fail the execution if this run left it unfinished; whether it is final now."""
    # it writes only its own message: nothing to redact
    repository = ExecutionRepository(db, Redactor())
    row = repository.get(execution_id)
    if row is None:
        return False
    if row.status in FINAL_STATUSES:
        return True
    if _paused(row.status, row.paused_reason):  # the kill switch: resumed on release
        return False
    if row.status == ExecutionStatus.AWAITING_APPROVAL:  # resumed once decided
        return False
    resumed = row.status == ExecutionStatus.QUEUED and row.lease_epoch > epoch_before
    if resumed or row.lease_epoch > epoch_before + 1:  # queued again, or a later attempt's
        return False
    repository.finish(execution_id, status=ExecutionStatus.FAILED, outcome="error",
                      error_code=ErrorCode.SUBSTRATE_ERROR.value,
                      error_message="the execution's process ended without finishing it")
    return True


def _paused(status: str, paused_reason: str | None) -> bool:
    """Held back by the kill switch: queued, to resume on release (not a process that died)."""
    return status == ExecutionStatus.QUEUED and paused_reason is not None


FINALIZE_TAIL = 64
"""How far back :func:`_ensure_finished_event` looks for the loop's ``finished`` before the
finalization's events."""


def _ensure_finished_event(db: Database, execution_id: str) -> None:
    """Append a ``finished`` event when the journal does not end with one."""
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None or _paused(row.status, row.paused_reason):
        return
    # the loop's ``finished`` may be followed by the finalization's steps (commit, push, pull
    # request, their retries): those do not make the journal unfinished
    tail = repository.events(execution_id, after_seq=max(row.event_seq - FINALIZE_TAIL, 0))
    while tail and tail[-1].kind == AgentEventKind.FINALIZE.value:
        tail.pop()
    if tail and tail[-1].kind == AgentEventKind.FINISHED.value:
        return
    error = ({"code": row.error_code, "message": row.error_message}
             if row.error_code else None)
    # the row's own fields, redacted when they were stored: nothing new to redact
    DbEventSink(db, Redactor()).emit(AgentEvent(
        kind=AgentEventKind.FINISHED, execution_id=execution_id, cycle=0,
        data={"status": row.status, "outcome": row.outcome, "error": error},
    ))
