"""The event journal: a :class:`~services.execution.ports.EventSink` writing ``execution_events``.

Sequence numbers come from the execution's own counter (``node_executions.event_seq``), bumped by
an ``UPDATE ... RETURNING`` in the same transaction as the inserts: the row lock (PostgreSQL) or
the database write lock (SQLite, ``BEGIN IMMEDIATE``) serializes writers of one execution, and a
transaction that dies (even by SIGKILL) takes its numbers with it, so ``seq`` runs 1, 2, 3, ...
without gaps. The ``(execution_id, seq)`` primary key backs this up.

Two ways to write:

* **write-through** (the default): every event is one committed transaction (the launcher, the
  reaper, a failure recorded before a loop: one event each);
* **buffered** (``buffered=True``, what a loop uses): events wait in memory and are committed
  together, in order, at the *barriers* a resume needs (:data:`BARRIERS`): a ``tool_call`` (the
  call is durable before its side effect), a ``tool_result`` (the call's effect is durable before
  the next model call), ``approval_requested`` (the pause is durable before the attempt ends),
  ``compaction`` (the paid-for summary is durable before the next model call: a resume replays
  it) and ``finished``; also when :data:`MAX_PENDING` events wait, and on
  :meth:`DbEventSink.flush`. Writes handed to :meth:`DbEventSink.defer` (a tool call's record and
  checkpoint, a budget charge) ride along in the same transaction. A turn with one tool call is
  thus two commits: model request, response, usage and the call; then the call's record, its
  checkpoint and its result. What a crash loses is what a resume redoes anyway (a model turn
  whose call never started, a call whose result was not yet recorded: it is answered
  ``interrupted``, as a call killed while it runs).

A live stream reading the journal sees events in batches, still in order and without gaps.

A write that has an ``after_commit(reported)`` method (a team's charge: its alerts are announced
once they are durable) is called after the commit that wrote it, with what the PostgreSQL
function reported for the commit (``[]`` on SQLite). Given a :class:`StateReader`
(:meth:`DbEventSink.read_with`), a commit that ends with a ``tool_result`` or a ``compaction``
(the ones a model call follows) reads, in its own transaction, the state the checks before that
call read (:mod:`services.db.step_reads`), and hands it over: on PostgreSQL inside the same
function call, so a tool step is two round trips, its two commits.

Both commit paths are SQLAlchemy Core on a connection (no ORM session: a loop commits twice a
step), their statements built once with bound parameters; on SQLite the ones of every step run
compiled once, on the DBAPI cursor (:mod:`services.db.statements`). A buffered journal
keeps its connections for the loop: on PostgreSQL the one its function calls go over (and the
reads before the calls with it), on SQLite one for its commits and one for those reads
(:mod:`services.db.journal_sqlite`).

``tool_call`` and ``tool_result`` events also write the ``tool_calls`` evidence row. Event data is
redacted before it is stored, with the redactor the caller gives (the run's own: there is no
default), its large strings once per execution (:mod:`services.db.blobs`).
When a lease epoch is given, a write from a process whose epoch is no longer the execution's
raises :class:`StaleLease` and writes nothing (the deferred writes included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Table, bindparam, insert, update

from services.db.base import utcnow
from services.db.blobs import externalize
from services.db.evidence import record_tool_call
from services.db.executions import UnknownExecution
from services.db.journal_pg import (
    UNKNOWN_EXECUTION,
    CommitRefused,
    Committed,
    EventRow,
    PgCommitter,
)
from services.db.journal_sqlite import SqliteHold
from services.db.models import ExecutionEvent, NodeExecution
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.statements import Statement
from services.execution.errors import ExecutionError
from services.execution.ports import AgentEvent, AgentEventKind, EventSink


class StaleLease(ExecutionError):
    """This process no longer holds the execution's lease: it must stop writing."""


_EVENTS: Table = ExecutionEvent.__table__  # type: ignore[assignment]
_EXECUTIONS: Table = NodeExecution.__table__  # type: ignore[assignment]
_INSERT_EVENTS = Statement(insert(_EVENTS).values({
    name: bindparam(name) for name in ("execution_id", "seq", "kind", "cycle", "data",
                                       "created_at")}))
_BUMP_SEQ = Statement(
    update(_EXECUTIONS)
    .where(_EXECUTIONS.c.id == bindparam("p_id"))
    .values(event_seq=_EXECUTIONS.c.event_seq + bindparam("p_count"),
            updated_at=bindparam("p_now"))
    .returning(_EXECUTIONS.c.event_seq, _EXECUTIONS.c.lease_epoch)
)

BARRIERS = frozenset({AgentEventKind.TOOL_CALL, AgentEventKind.TOOL_RESULT,
                      AgentEventKind.FINISHED, AgentEventKind.APPROVAL_REQUESTED,
                      AgentEventKind.COMPACTION, AgentEventKind.RETRY})
MAX_PENDING = 64
T = TypeVar("T")
READ_AFTER = frozenset({AgentEventKind.TOOL_RESULT, AgentEventKind.COMPACTION})


class PendingWrite(Protocol):
    """A write that rides along with the journal's next commit (a tool call's record and
    checkpoint, a budget charge)."""

    def apply(self, connection: Connection, known_blobs: set[str] | None = None) -> None:
        """Write it in ``connection``'s transaction (SQLite, statement by statement, Core);
        ``known_blobs``: the blobs this transaction already stored for its execution."""

    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        """Its operations for ``studio_journal_commit`` (PostgreSQL); large strings go to
        ``blobs``."""


class StateReader(Protocol):
    """What the checks before a model call read (:class:`~services.db.step_reads.StepReads`),
    read with a commit."""

    execution_id: str

    def read_keys(self) -> dict[str, Any]:
        """The ``read`` of ``studio_journal_commit`` (PostgreSQL)."""

    def read_in(self, connection: Connection) -> Any:
        """The state, read in ``connection``'s transaction (SQLite)."""

    def offer(self, state: Any) -> None:
        """Hand over a state read with a commit (``read_in``'s, or the PostgreSQL function's
        JSON) once that commit is done."""

    def read_through(self, read: Callable[[str, Callable[[Connection], Any]], Any]) -> None:
        """Make its own reads with ``read`` (the journal's held connection, PostgreSQL)."""


class DbEventSink:
    def __init__(
        self, db: Database, redactor: Redactor, *, lease_epoch: int | None = None,
        buffered: bool = False, max_pending: int = MAX_PENDING,
    ) -> None:
        self._db = db
        self._redactor = redactor
        self._lease_epoch = lease_epoch
        self._buffered = buffered
        self._max_pending = max_pending
        self._lock = threading.RLock()
        self._events: list[tuple[AgentEvent, dict[str, Any]]] = []
        self._writes: list[tuple[str, PendingWrite]] = []
        self._downstream: list[EventSink] = []
        self._pg = PgCommitter(db, hold=buffered) if db.dialect == "postgresql" else None
        self._sqlite = SqliteHold(db) if buffered and self._pg is None else None
        self._reader: StateReader | None = None

    def read_with(self, reader: StateReader) -> None:
        """Read ``reader``'s state with each commit a model call follows (module docstring);
        its own reads go over the journal's kept connection (PostgreSQL, while it is held) or
        its kept read connection (SQLite, buffered)."""
        self._reader = reader
        if self._pg is not None or self._sqlite is not None:
            reader.read_through(self._held_read)

    def _held_read(self, what: str, query: Callable[[Connection], T]) -> T:
        with self._lock:
            if self._pg is not None:
                return self._pg.read(what, query)
            assert self._sqlite is not None
            return self._sqlite.read(what, query)

    def forward_to(self, sinks: Sequence[EventSink]) -> None:
        """Hand every event, once committed, to ``sinks`` in order (durable before shown), with
        its data as it was stored: redacted by :attr:`redactor`."""
        self._downstream = list(sinks)

    @property
    def redactor(self) -> Redactor:
        """What the events' data is redacted with before it is stored (and forwarded)."""
        return self._redactor

    def emit(self, event: AgentEvent) -> None:
        if not self._buffered:
            self.append(event)
            return
        data: dict[str, Any] = self._redactor.data(dict(event.data))
        with self._lock:
            self._events.append((event, data))
            if event.kind in BARRIERS or len(self._events) >= self._max_pending:
                self.flush()

    def append(self, event: AgentEvent) -> int:
        """Write ``event`` (and whatever waits) now; answers its sequence number."""
        data: dict[str, Any] = self._redactor.data(dict(event.data))
        with self._lock:
            self._events.append((event, data))
            return self.flush()

    def defer(self, execution_id: str, write: PendingWrite) -> None:
        """Apply ``write`` in the transaction of the next commit (now, when not buffered)."""
        with self._lock:
            self._writes.append((execution_id, write))
            if not self._buffered:
                self.flush()

    @property
    def pending(self) -> int:
        """Events waiting for the next commit."""
        return len(self._events)

    def flush(self) -> int:
        """Commit what waits, in one transaction per execution (one, in practice); answers the
        last sequence number written (0 when there were no events)."""
        with self._lock:
            events, writes = self._events, self._writes
            if not events and not writes:
                return 0
            self._events, self._writes = [], []  # written now, or (on error) never
            writes = _without_repeats(events, writes)
            by_execution: dict[str, list[tuple[AgentEvent, dict[str, Any]]]] = {}
            for event, data in events:
                by_execution.setdefault(event.execution_id, []).append((event, data))
            for execution_id, _ in writes:
                by_execution.setdefault(execution_id, [])
            last = 0
            reader = self._reader if events and events[-1][0].kind in READ_AFTER else None
            state: Any = None
            reported: list[dict[str, Any]] = []
            if self._pg is not None:
                for execution_id, batch in by_execution.items():
                    committed = self._commit_pg(
                        execution_id, batch, [w for e, w in writes if e == execution_id],
                        reader.read_keys()
                        if reader is not None and reader.execution_id == execution_id else None)
                    last = committed.seq if batch else 0
                    reported.extend(committed.alerts)
                    state = committed.state if committed.state is not None else state
            else:
                known: dict[str, set[str]] = {}
                transaction = (self._sqlite.transaction() if self._sqlite is not None
                               else self._db.transaction())
                with transaction as connection:
                    for execution_id, batch in by_execution.items():
                        last = self._insert(connection, execution_id, batch,
                                            known.setdefault(execution_id, set()))
                    for execution_id, write in writes:
                        write.apply(connection, known.setdefault(execution_id, set()))
                    if reader is not None and reader.execution_id in by_execution:
                        state = reader.read_in(connection)
            if reader is not None and state is not None:
                reader.offer(state)
            for _, write in writes:
                after = getattr(write, "after_commit", None)
                if after is not None:
                    after(reported)
            for event, data in events:
                shown = replace(event, data=data) if self._downstream else event
                for sink in self._downstream:
                    sink.emit(shown)
            return last

    def close(self) -> None:
        """Commit what waits and give back the connection a buffered journal keeps."""
        with self._lock:
            try:
                self.flush()
            finally:
                if self._pg is not None:
                    self._pg.close()
                if self._sqlite is not None:
                    self._sqlite.close()

    def _commit_pg(self, execution_id: str, batch: list[tuple[AgentEvent, dict[str, Any]]],
                   writes: list[PendingWrite], read: dict[str, Any] | None) -> Committed:
        assert self._pg is not None
        rows = [EventRow(event.kind.value, event.cycle, data, _evidence_args(event, data))
                for event, data in batch]
        try:
            return self._pg.commit(execution_id, self._lease_epoch, rows, writes, read)
        except CommitRefused as refused:
            if refused.code == UNKNOWN_EXECUTION:
                raise UnknownExecution(execution_id) from None
            raise self._stale(execution_id, refused.current_epoch) from None

    def _insert(self, connection: Connection, execution_id: str,
                batch: list[tuple[AgentEvent, dict[str, Any]]], known: set[str]) -> int:
        """The batch in ``connection``'s transaction, in Core statements built once: the
        counter bumped, the events in one ``executemany``, the evidence upserts."""
        last = self._bump_seq(connection, execution_id, len(batch))
        first = last - len(batch) + 1
        if batch:
            _INSERT_EVENTS.execute_many(connection, [
                {"execution_id": execution_id, "seq": first + index, "kind": event.kind.value,
                 "cycle": event.cycle,
                 "data": externalize(connection, execution_id, data, known=known),
                 "created_at": utcnow()}
                for index, (event, data) in enumerate(batch)])
        for event, data in batch:
            found = _evidence_args(event, data)
            if found is not None:
                record_tool_call(connection, event.execution_id, known_blobs=known, **found)
        return last

    def _bump_seq(self, connection: Connection, execution_id: str, count: int) -> int:
        """Reserve ``count`` sequence numbers (the row locked until commit, the lease epoch
        checked); answers the last one."""
        row = _BUMP_SEQ.execute(connection, {"p_id": execution_id, "p_count": count,
                                             "p_now": utcnow()}).one_or_none()
        if row is None:
            raise UnknownExecution(execution_id)
        seq, epoch = row
        if self._lease_epoch is not None and epoch != self._lease_epoch:
            raise self._stale(execution_id, epoch)
        return int(seq)

    def _stale(self, execution_id: str, epoch: int | None) -> StaleLease:
        return StaleLease(f"lease epoch {self._lease_epoch} is stale (now {epoch})",
                          details={"execution_id": execution_id})


def _without_repeats(events: list[tuple[AgentEvent, dict[str, Any]]],
                     writes: list[tuple[str, PendingWrite]]) -> list[tuple[str, PendingWrite]]:
    """``writes`` without those that would change nothing after the evidence the events write
    first in the same transaction (a write with a ``repeats(written)`` method says so: the
    idempotency store's record of a call whose ``tool_result`` event carries it)."""
    if not writes:
        return writes
    written: dict[tuple[str, str], dict[str, Any]] = {}
    for event, data in events:
        found = _evidence_args(event, data)
        if found is not None:
            written.setdefault((event.execution_id, found["call_id"]), found)
    if not written:
        return writes
    kept = []
    for execution_id, write in writes:
        repeated = getattr(write, "repeats", None)
        if repeated is None or not repeated(written):
            kept.append((execution_id, write))
    return kept


def _evidence_args(event: AgentEvent, data: dict[str, Any]) -> dict[str, Any] | None:
    """The evidence a ``tool_call`` or ``tool_result`` event writes (``None``: none)."""
    if event.kind not in (AgentEventKind.TOOL_CALL, AgentEventKind.TOOL_RESULT):
        return None
    call = data.get("call") if isinstance(data.get("call"), dict) else None
    envelope = data.get("envelope") if isinstance(data.get("envelope"), dict) else None
    call_id = (call or envelope or {}).get("call_id")
    if not call_id:
        return None
    provider = data.get("provider")
    return {"call_id": str(call_id), "call": call,
            "envelope": envelope if event.kind is AgentEventKind.TOOL_RESULT else None,
            "cycle": int(data.get("cycle", event.cycle)),
            "provider": str(provider) if provider is not None else None}
