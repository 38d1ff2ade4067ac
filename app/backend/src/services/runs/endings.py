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

The retry decision is made here too, for every caller alike: a failure with an
``infrastructure`` code (:data:`~services.execution.errors.ERROR_KINDS`) ended under a lease is
not final; it is queued again with ``retry_at``, or dead-lettered after the last attempt
(:mod:`services.runs.retries`), and the journal gets a ``retry`` event after the ``finished``.

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
from services.runs.retries import retry_columns, retry_event, retryable

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
                  redactor: Redactor | None = None, update: Update | None = None,
                  retry: bool = True, retry_after: float | None = None) -> str:
    """End the execution: append the ``finished`` event with ``event`` as its data (``None``:
    the journal holds one already), then write the end columns ``fields`` and ``finished_at``;
    answers the status written.

    A failure with an infrastructure code, under a lease (``epoch``) and with ``retry``, is
    queued again instead (``retry_after``: the provider's ``Retry-After``, seconds), or
    dead-lettered after the last attempt (:func:`~services.runs.retries.retry_columns`).

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
        return str(fields["status"])
    write = update or partial(LeaseStore(db).guarded_update, execution_id, epoch)
    if retry and retryable(fields):
        columns = retry_columns(db, execution_id, fields, retry_after)
        DbEventSink(db, redactor, lease_epoch=epoch).emit(AgentEvent(
            AgentEventKind.RETRY, execution_id, 0, retry_event(columns)))
        write(columns)
        return str(columns["status"])
    write({**fields, "finished_at": utcnow()})
    return str(fields["status"])


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
    if row.status in (ExecutionStatus.AWAITING_APPROVAL,  # resumed once decided
                      ExecutionStatus.DEAD_LETTERED):  # an operator's to retry or discard
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
