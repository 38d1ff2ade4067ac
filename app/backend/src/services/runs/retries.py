"""Retries of executions ended by an infrastructure error, and the dead-letter queue.

:func:`services.runs.endings.end_execution` asks :func:`retry_columns` what an ending failure
becomes. An ``infrastructure`` code (:data:`~services.execution.errors.ERROR_KINDS`) with
attempts left: ``queued`` again, with ``retry_at`` after an exponential backoff with jitter
(:class:`Backoff`, runtime settings ``retry_base_s``, ``retry_factor``, ``retry_max_delay_s``;
a provider's ``Retry-After`` is honoured, up to the cap) and ``last_error``; the reaper
dispatches it once ``retry_at`` has passed (:func:`dispatch_due`). After
``retry_max_attempts`` failed attempts: ``dead_lettered``. Every failed attempt's error is kept
in ``attempt_errors``.

A retry resumes like any other attempt (the checkpoint, the tool-call records, the keyed
finalization): no side effect is repeated. The journal gets a ``retry`` event after the failed
attempt's ``finished``, so the next attempt runs the loop again
(:func:`services.runs.results.recorded_run`) instead of reading that ending back.

An operator re-drives a dead-lettered execution (:func:`redrive`: ``queued`` again, from its
checkpoint, a fresh round of attempts) or discards it (:func:`discard`: ``failed`` with
``dead_lettered``); both are recorded in ``operator_actions`` with who and when.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from services.db.base import utcnow
from services.db.journal import DbEventSink
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.retries import NotDeadLettered, RetryStore
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode, ErrorKind, error_kind
from services.execution.ports import AgentEvent, AgentEventKind
from services.telemetry import record

log = logging.getLogger(__name__)

_RNG = random.SystemRandom()


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: the ``n``-th retry waits between the ceiling of the
    retry before (half its own for the first) and its own ceiling ``base_s * factor ** (n - 1)``
    (at most ``max_delay_s``), so each wait is at least as long as the one before; a
    ``Retry-After`` longer than that is waited instead (up to the cap)."""

    base_s: float = 30.0
    factor: float = 2.0
    max_delay_s: float = 900.0
    max_attempts: int = 5

    @classmethod
    def from_db(cls, db: Database) -> Backoff:
        settings = SettingsRepository(db)
        return cls(float(settings.get("retry_base_s")), float(settings.get("retry_factor")),
                   float(settings.get("retry_max_delay_s")),
                   int(settings.get("retry_max_attempts")))

    def _ceiling(self, retry: int) -> float:
        return min(self.max_delay_s, self.base_s * self.factor ** (retry - 1))

    def delay(self, retry: int, retry_after: float | None = None,
              rng: random.Random = _RNG) -> float:
        """Seconds before retry number ``retry`` (1-based)."""
        ceiling = self._ceiling(retry)
        # from the ceiling before this one: each wait at least as long as the last
        low = self._ceiling(retry - 1) if retry > 1 else ceiling / 2
        wait = low + rng.uniform(0, ceiling - low)
        if retry_after is not None and retry_after > wait:
            wait = retry_after
        return min(wait, self.max_delay_s)


def retryable(fields: dict[str, Any]) -> bool:
    """Whether the end columns ``fields`` are a failure with an ``infrastructure`` code."""
    return (fields.get("status") == ExecutionStatus.FAILED
            and error_kind(fields.get("error_code")) is ErrorKind.INFRASTRUCTURE)


def _error(fields: dict[str, Any], attempt: int, now: datetime) -> dict[str, Any]:
    code = str(fields["error_code"])
    return {"attempt": attempt, "code": code, "kind": error_kind(code).value,
            "message": fields.get("error_message"), "at": now.isoformat()}


def retry_columns(db: Database, execution_id: str, fields: dict[str, Any],
                  retry_after: float | None, backoff: Backoff | None = None) -> dict[str, Any]:
    """What the failure ``fields`` of an infrastructure error become on the row: ``queued``
    with ``retry_at`` and ``last_error``, or ``dead_lettered`` after the last attempt; every
    attempt's error appended to ``attempt_errors``. The row's earlier errors are read here;
    the caller writes the answer fenced by its lease (one writer)."""
    backoff = backoff or Backoff.from_db(db)
    earlier = RetryStore(db).attempt_errors(execution_id)
    now = utcnow()
    failed = [*earlier, _error(fields, len(earlier) + 1, now)]
    failed_here = len(failed) - _redriven_at(failed)
    record.execution_retry(str(fields["error_code"]),
                           "dead_lettered" if failed_here >= backoff.max_attempts else "queued")
    if failed_here >= backoff.max_attempts:
        return {**fields, "status": ExecutionStatus.DEAD_LETTERED, "retry_at": None,
                "last_error": failed[-1], "attempt_errors": failed, "finished_at": None}
    delay = backoff.delay(failed_here, retry_after)
    retry_at = now + timedelta(seconds=delay)
    failed[-1] = {**failed[-1], "retry_at": retry_at.isoformat(), "delay_s": round(delay, 3)}
    return {"status": ExecutionStatus.QUEUED, "retry_at": retry_at, "last_error": failed[-1],
            "attempt_errors": failed, "error_code": None, "error_message": None,
            "outcome": None, "finished_at": None, "dispatched_at": None,
            "yielded_attempts": NodeExecution.yielded_attempts + 1}


def _redriven_at(errors: list[dict[str, Any]]) -> int:
    """How many of ``errors`` came before the last operator re-drive (a re-drive starts a
    fresh round of attempts)."""
    marks = [i + 1 for i, e in enumerate(errors) if e.get("redriven")]
    return marks[-1] if marks else 0


def retry_event(columns: dict[str, Any]) -> dict[str, Any]:
    """The ``retry`` event's data for the columns :func:`retry_columns` answered."""
    last = dict(columns["last_error"])
    return {"status": str(columns["status"]), "error": last,
            "attempts": len(columns["attempt_errors"]), "retry_at": last.get("retry_at")}


# -- the reaper's side ------------------------------------------------------------------------
def dispatch_due(db: Database, dispatch: Callable[[str], Any],
                 dispatch_node: Callable[[str, str], Any] | None = None, *,
                 limit: int = 100) -> list[str]:
    """Dispatch every execution waiting to retry whose ``retry_at`` has passed (each stamped
    dispatched as it is found, so one reaper sends it); a flowchart node's through its node
    (``dispatch_node``: the node runs its execution, then advances the run), left for a
    caller that has one otherwise."""
    found = RetryStore(db).claim_due(nodes=dispatch_node is not None, limit=limit)
    for execution_id, node in found:
        log.info("reaper: execution %s is due for a retry; dispatching it", execution_id)
        record.reaper_dispatch("retry")
        send(execution_id, node, dispatch, dispatch_node)
    return [execution_id for execution_id, _ in found]


def send(execution_id: str, node: tuple[str, str] | None, dispatch: Callable[[str], Any],
         dispatch_node: Callable[[str, str], Any] | None) -> None:
    """Dispatch the execution, a flowchart node's through its node when there is a way to."""
    if node is not None and dispatch_node is not None:
        dispatch_node(*node)
    else:
        dispatch(execution_id)


def waits_for_retry(row: NodeExecution) -> bool:
    """Whether the execution waits for a retry (queued with ``retry_at``) or for an operator
    (dead-lettered): a flowchart node waits with it, neither failed nor finished."""
    return row.status == ExecutionStatus.DEAD_LETTERED or (
        row.status == ExecutionStatus.QUEUED and row.retry_at is not None)


# -- the operators' side ----------------------------------------------------------------------
def redrive(db: Database, execution_id: str, actor: str, dispatch: Callable[[str], Any],
            dispatch_node: Callable[[str, str], Any] | None = None) -> None:
    """Queue a dead-lettered execution again, recorded as ``actor``'s ``retry``, and dispatch
    it (a flowchart node's through its node). Its journal gets a ``retry`` event, so it
    resumes from its checkpoint and runs its loop again, with a fresh round of attempts."""
    now = utcnow()
    RetryStore(db).operator_act(execution_id, "retry", actor, {
        "status": ExecutionStatus.QUEUED, "retry_at": now, "dispatched_at": now,
        "error_code": None, "error_message": None, "outcome": None})
    DbEventSink(db, Redactor()).emit(AgentEvent(AgentEventKind.RETRY, execution_id, 0, {
        "status": ExecutionStatus.QUEUED.value, "redriven_by": actor}))
    log.info("execution %s re-driven from the dead-letter queue by %s", execution_id, actor)
    send(execution_id, RetryStore(db).node_of(execution_id), dispatch, dispatch_node)


def discard(db: Database, execution_id: str, actor: str,
            dispatch_node: Callable[[str, str], Any] | None = None) -> None:
    """End a dead-lettered execution ``failed`` (code ``dead_lettered``, its last error in the
    message), recorded as ``actor``'s ``discard``; a flowchart node's node is dispatched
    (``dispatch_node``) so that it fails and its run goes on."""
    store = RetryStore(db)
    last = store.last_error(execution_id)
    message = (f"discarded from the dead-letter queue by {actor}; last error "
               f"{last.get('code')}: {last.get('message')}")
    store.operator_act(execution_id, "discard", actor, {
        "status": ExecutionStatus.FAILED, "outcome": "error",
        "error_code": ErrorCode.DEAD_LETTERED.value, "error_message": message,
        "retry_at": None, "finished_at": utcnow()})
    DbEventSink(db, Redactor()).emit(AgentEvent(AgentEventKind.FINISHED, execution_id, 0, {
        "status": ExecutionStatus.FAILED.value, "outcome": "error", "discarded_by": actor,
        "error": {"code": ErrorCode.DEAD_LETTERED.value, "message": message}}))
    log.info("execution %s discarded from the dead-letter queue by %s", execution_id, actor)
    node = store.node_of(execution_id)
    if node is not None and dispatch_node is not None:
        dispatch_node(*node)


__all__ = ["Backoff", "NotDeadLettered", "discard", "dispatch_due", "redrive", "retry_columns",
           "retry_event", "retryable", "send", "waits_for_retry"]
