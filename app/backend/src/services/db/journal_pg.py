"""The journal's commit on PostgreSQL: one call of ``studio_journal_commit``, one round trip.

The function (created by migration 0007, answering JSON since 0021) does in the server what the
journal does statement by statement on SQLite: bump the sequence counter and check the lease
epoch, store the blobs, insert the events, apply the evidence, checkpoint and budget operations
and the team's charge (each :class:`~services.db.journal.PendingWrite` gives its own as JSON).
It answers the last sequence number, the team budget alerts the commit inserted and, when asked
(``read``), the state the loop's next checks read (:mod:`services.db.step_reads`), as of the
commit. The call runs in autocommit mode, so it is its own transaction: no ``BEGIN``, no
``COMMIT``, one statement.
:class:`PgCommitter` keeps one connection for a loop's journal (no pool checkout, no pre-ping
between commits) and takes a fresh, pinged one from the pool after :data:`IDLE_S` without use;
the loop's reads before its calls (:mod:`services.db.step_reads`) use it too while it is held
(:meth:`PgCommitter.read`).

A commit cut by a lost connection (the held connection ended under it by a failover, a pooler
restart, an idle reaper) is run again, whole, on a fresh connection
(:func:`~services.db.connection_loss.rerun`). It is keyed by its sequence numbers: before running
it again, :meth:`PgCommitter.landed` reads whether the events it carried are already in the
journal, right after the last sequence number this committer wrote (or, for its first commit, as
the journal's last events), with the same kinds, cycles and data; if so the cut commit did
complete (only its answer was lost) and nothing is written twice. Its evidence, checkpoint and
budget operations ride in the same transaction, so they landed with it (or not at all).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from sqlalchemy import Connection, Table, select
from sqlalchemy.exc import DBAPIError, NoResultFound

from services.db.blobs import compress, extract
from services.db.connection_loss import rerun
from services.db.evidence import evidence_op
from services.db.models import ExecutionEvent, NodeExecution
from services.db.session import Database
from services.db.statements import driver_sql

IDLE_S = 10.0
T = TypeVar("T")
UNKNOWN_EXECUTION = "SX001"
STALE_EPOCH = "SX002"
_KNOWN_DIGESTS_MAX = 10_000
# sent as it is (:func:`~services.db.statements.driver_sql`: on psycopg's cursor, or through
# ``exec_driver_sql`` when something listens to the statements)
_CALL = "SELECT studio_journal_commit(CAST(%(payload)s AS json))"
_EVENTS: Table = ExecutionEvent.__table__  # type: ignore[assignment]
_EXECUTIONS: Table = NodeExecution.__table__  # type: ignore[assignment]


class OpsSource(Protocol):
    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]: ...


@dataclass(frozen=True)
class EventRow:
    kind: str
    cycle: int
    data: dict[str, Any]
    evidence: dict[str, Any] | None  # the arguments of :func:`evidence_op`, for tool events


@dataclass(frozen=True)
class Committed:
    """What a commit answered: the last sequence number (the counter when no events), the
    alerts it inserted (``services.db.team_budget``), the state read with it (or ``None``)."""

    seq: int
    alerts: list[dict[str, Any]]
    state: dict[str, Any] | None


class CommitRefused(Exception):  # noqa: N818 (mapped to UnknownExecution or StaleLease)
    """The function refused the commit (nothing was written)."""

    def __init__(self, code: str, current_epoch: int | None) -> None:
        super().__init__(code)
        self.code = code
        self.current_epoch = current_epoch


class PgCommitter:
    def __init__(self, db: Database, *, hold: bool) -> None:
        self._db = db
        self._hold = hold
        self._conn: Connection | None = None
        self._used_at = 0.0
        self._known: set[tuple[str, str]] = set()
        self._last: dict[str, int] = {}  # execution id -> the last sequence number written

    def commit(self, execution_id: str, epoch: int | None, events: list[EventRow],
               writes: Sequence[OpsSource], read: dict[str, Any] | None = None) -> Committed:
        """One call; ``read``: the keys of the state to read with it (see the module
        docstring)."""
        blobs: dict[str, bytes] = {}
        payload: dict[str, Any] = {
            "execution_id": execution_id, "epoch": epoch,
            "events": [{"kind": e.kind, "cycle": e.cycle, "data": extract(e.data, blobs)}
                       for e in events],
        }
        if read is not None:
            payload["read"] = read
        ops = [evidence_op(blobs=blobs, **e.evidence) for e in events if e.evidence is not None]
        for write in writes:
            ops.extend(write.as_ops(blobs))
        payload["ops"] = ops
        fresh = {d: raw for d, raw in blobs.items() if (execution_id, d) not in self._known}
        payload["blobs"] = [{"digest": d, "size": len(raw),
                             "data": base64.b64encode(compress(raw)).decode()}
                            for d, raw in fresh.items()]
        text_payload = json.dumps(payload, separators=(",", ":"))
        before = self._last.get(execution_id)

        def landed() -> Committed | None:  # a cut commit that did land answers no alerts
            events_sent: list[dict[str, Any]] = json.loads(text_payload)["events"]
            seq = self.landed(execution_id, events_sent, before)
            return Committed(seq, [], None) if seq is not None else None

        committed = rerun("journal append", lambda: self._call(text_payload),
                          before_rerun=landed)
        self._last[execution_id] = committed.seq
        if len(self._known) > _KNOWN_DIGESTS_MAX:
            self._known.clear()
        self._known.update((execution_id, d) for d in fresh)
        return committed

    def _call(self, payload: str) -> Committed:
        conn = self._connection()
        try:
            row = driver_sql(conn, _CALL, {"payload": payload})
            if row is None:
                raise NoResultFound("studio_journal_commit answered no row")
            answer = row[0]
            if isinstance(answer, str | bytes):  # a driver that does not load json itself
                answer = json.loads(answer)
            return Committed(int(answer["seq"]), list(answer.get("alerts") or []),
                             answer.get("state"))
        except DBAPIError as exc:
            self.close()
            sqlstate = getattr(exc.orig, "sqlstate", None)
            if sqlstate in (UNKNOWN_EXECUTION, STALE_EPOCH):
                detail = getattr(getattr(exc.orig, "diag", None), "message_detail", None)
                current = int(detail) if detail and detail.lstrip("-").isdigit() else None
                raise CommitRefused(sqlstate, current) from None
            raise
        finally:
            self._used_at = time.monotonic()
            if not self._hold:
                self.close()

    def landed(self, execution_id: str, events: list[dict[str, Any]],
               before: int | None) -> int | None:
        """The last sequence number of ``events`` if a commit of them already landed (right
        after ``before``, or, when ``before`` is unknown, as the journal's last events), else
        ``None``. A commit without events has no key: ``None`` (it is run again)."""
        count = len(events)
        if not count:
            return None

        def read(connection: Connection) -> int | None:
            counter = connection.execute(select(_EXECUTIONS.c.event_seq).where(
                _EXECUTIONS.c.id == execution_id)).scalar_one_or_none()
            if counter is None or (before is not None and counter < before + count):
                return None
            first = before + 1 if before is not None else counter - count + 1
            rows = connection.execute(
                select(_EVENTS.c.kind, _EVENTS.c.cycle, _EVENTS.c.data)
                .where(_EVENTS.c.execution_id == execution_id, _EVENTS.c.seq >= first,
                       _EVENTS.c.seq < first + count).order_by(_EVENTS.c.seq)).all()
            found = [(row.kind, row.cycle, row.data) for row in rows]
            sent = [(e["kind"], e["cycle"], e["data"]) for e in events]
            return first + count - 1 if found == sent else None

        return self._db.read("journal append check", read)

    def read(self, what: str, query: Callable[[Connection], T]) -> T:
        """``query`` on the held connection while it is fresh (one round trip: no pool
        checkout, no ping), else as :meth:`Database.read` does; run again on a fresh connection
        when a lost connection cuts it."""
        if self._conn is None or time.monotonic() - self._used_at > IDLE_S:
            return self._db.read(what, query)

        def once() -> T:
            conn = self._conn
            if conn is None:  # dropped by a lost connection: the pool's
                with self._db.read_connection() as connection:
                    return query(connection)
            try:
                return query(conn)
            except DBAPIError:
                self.close()
                raise
            finally:
                self._used_at = time.monotonic()

        return rerun(what, once)

    def _connection(self) -> Connection:
        if self._conn is not None and time.monotonic() - self._used_at > IDLE_S:
            self.close()  # idle for a while: a pinged connection from the pool
        if self._conn is None:
            self._conn = self._db.engine.connect().execution_options(
                isolation_level="AUTOCOMMIT")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
