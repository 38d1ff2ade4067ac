"""How an execution ends when its loop did not end it: the final columns and the ``finished``
event live streams end on, written in one place (:func:`end_execution`).

Three callers end an execution that way:

* the durable path (:mod:`services.runs.durable`): a refusal, a failed provisioning or a failed
  finalization fails the run, fenced by the attempt's lease epoch (the event only when the
  journal does not hold the loop's ``finished`` already);
* the reaper (:func:`services.runs.reaper.give_up`): an execution that lost its process
  ``max_attempts`` times, under a lease the reaper takes to fence any survivor off;
* :func:`end_abandoned`, after the process that ran an execution in this one ended
  (:func:`run_to_its_end`, what the API's launcher runs without a broker): an execution it
  left unfinished is failed with ``substrate_error``, and a final one whose journal does not
  end with ``finished`` gets it.

The event is appended before the columns: a process that dies between the two leaves a journal
that says how the run ended, and the next attempt (or :func:`end_abandoned`) writes the columns;
the other way round a final row would keep a live stream waiting on an event nobody writes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.status import FINAL_STATUSES, ExecutionStatus, held_by_killswitch
from services.execution.errors import ErrorCode
from services.execution.ports import AgentEvent, AgentEventKind

FINALIZE_TAIL = 64
"""How far back :func:`ensure_finished_event` looks for the loop's ``finished`` before the
finalization's events."""

Update = Callable[[dict[str, Any]], None]


def substrate_failure(message: str) -> dict[str, Any]:
    """The end columns of an execution whose process failed it (``substrate_error``)."""
    return {"status": ExecutionStatus.FAILED, "outcome": "error",
            "error_code": ErrorCode.SUBSTRATE_ERROR.value, "error_message": message}


def finished_data(fields: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The ``finished`` event's data for the end columns ``fields``."""
    error = ({"code": fields["error_code"], "message": fields.get("error_message")}
             if fields.get("error_code") else None)
    return {**extra, "status": fields["status"], "outcome": fields["outcome"], "error": error}


def end_execution(db: Database, execution_id: str, fields: dict[str, Any],
                  event: dict[str, Any] | None, *, epoch: int | None = None,
                  redactor: Redactor | None = None, update: Update | None = None) -> None:
    """End the execution: append the ``finished`` event with ``event`` as its data (``None``:
    the journal holds one already), then write the end columns ``fields`` and ``finished_at``.

    With ``epoch`` both writes are fenced by that lease epoch (``update``: the held lease's own
    fenced update, else the lease store's); without one the row is finished as it stands.
    Without ``redactor`` nothing is redacted: the caller writes only its own texts or fields
    that were redacted when they were stored (the launcher's and the reaper's endings)."""
    redactor = redactor if redactor is not None else Redactor()
    if event is not None:
        DbEventSink(db, redactor, lease_epoch=epoch).emit(AgentEvent(
            AgentEventKind.FINISHED, execution_id, 0, event))
    if epoch is None:
        ExecutionRepository(db, redactor).finish(execution_id, **fields)
        return
    write = update or partial(LeaseStore(db).guarded_update, execution_id, epoch)
    write({**fields, "finished_at": utcnow()})


def run_to_its_end(db: Database, run: Callable[[str], object], execution_id: str) -> None:
    """Run the execution in this process (``run``: its ``studio execute`` child), then end it
    if that process left it unfinished (:func:`end_abandoned`)."""
    before = ExecutionRepository(db).get(execution_id)
    epoch = before.lease_epoch if before is not None else 0
    try:
        run(execution_id)
    finally:
        end_abandoned(db, execution_id, epoch)


def end_abandoned(db: Database, execution_id: str, epoch_before: int = 0) -> None:
    """After the process that ran the execution here ended (the lease epoch was
    ``epoch_before`` when it started): an execution it left unfinished is failed, and a final
    one gets its ``finished`` event if the journal lacks it. Left alone: one the kill switch
    holds or that waits for an approval (both resume later), and one queued again or taken by
    a later attempt meanwhile."""
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None:
        return
    if row.status in FINAL_STATUSES:
        ensure_finished_event(db, execution_id)
        return
    if not _abandoned(row, epoch_before):
        return
    fields = substrate_failure("the execution's process ended without finishing it")
    ended = _journal_finished(repository, row)
    end_execution(db, execution_id, fields, None if ended else finished_data(fields))


def _abandoned(row: NodeExecution, epoch_before: int) -> bool:
    if held_by_killswitch(row.status, row.paused_reason):  # resumed on release
        return False
    if row.status == ExecutionStatus.AWAITING_APPROVAL:  # resumed once decided
        return False
    resumed = row.status == ExecutionStatus.QUEUED and row.lease_epoch > epoch_before
    # queued again, or a later attempt's
    return not (resumed or row.lease_epoch > epoch_before + 1)


def ensure_finished_event(db: Database, execution_id: str) -> None:
    """Append a ``finished`` event, from the row as it stands, when the journal does not end
    with one (nothing for an execution the kill switch holds)."""
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None or held_by_killswitch(row.status, row.paused_reason):
        return
    if _journal_finished(repository, row):
        return
    # the row's own fields, redacted when they were stored: nothing new to redact
    DbEventSink(db, Redactor()).emit(AgentEvent(
        kind=AgentEventKind.FINISHED, execution_id=execution_id, cycle=0,
        data=finished_data({"status": row.status, "outcome": row.outcome,
                            "error_code": row.error_code, "error_message": row.error_message}),
    ))


def _journal_finished(repository: ExecutionRepository, row: NodeExecution) -> bool:
    """Whether the journal ends with ``finished``: the loop's may be followed by the
    finalization's steps (commit, push, pull request, their retries), which do not make the
    journal unfinished."""
    tail = repository.events(row.id, after_seq=max(row.event_seq - FINALIZE_TAIL, 0))
    while tail and tail[-1].kind == AgentEventKind.FINALIZE.value:
        tail.pop()
    return bool(tail) and tail[-1].kind == AgentEventKind.FINISHED.value
