"""A database-backed :class:`~services.execution.ports.IdempotencyStore`.

Envelopes live in the ``tool_calls`` evidence row of ``(execution_id, call_id)``; the first
``put`` wins and later ones change nothing, so a call dispatched again after a crash gets the
recorded envelope back. The stored (and returned) envelope is redacted. Only calls that may have
a record are read (:class:`~services.db.evidence.RecordedCalls`): a new call costs no read.

Given the loop's buffered journal (``journal=``), a ``put`` rides along with the journal's next
commit, the one of the call's ``tool_result`` event that the loop emits right after it: the
call's record and its result are then one transaction (as in a durable execution, see
:mod:`services.runs.checkpoints`), instead of a transaction of their own. A record written on its
own is keyed by the call id (the first write wins), so a transaction a lost connection cut is
run again whole (:func:`~services.db.connection_loss.rerun`).
"""

from __future__ import annotations

from typing import Any

from services.db.checkpoints import CallWrite
from services.db.connection_loss import rerun
from services.db.evidence import RecordedCalls, record_tool_call, recorded_envelope
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.session import Database


class DbIdempotencyStore:
    def __init__(self, db: Database, redactor: Redactor, *,
                 journal: DbEventSink | None = None) -> None:
        self._db = db
        self._redactor = redactor
        self._journal = journal
        self._recorded = RecordedCalls(db)

    def get(self, execution_id: str, call_id: str) -> dict[str, Any] | None:
        if not self._recorded.may_exist(execution_id, call_id):
            return None  # a new call: no read (see RecordedCalls)
        return recorded_envelope(self._db, execution_id, call_id)

    def put(self, execution_id: str, call_id: str, envelope: dict[str, Any]) -> None:
        redacted = self._redactor.data(envelope)
        self._recorded.add(execution_id, call_id)
        if self._journal is not None:
            self._journal.defer(execution_id, CallWrite(execution_id, call_id, redacted,
                                                        None, None, None))
            return
        def write() -> None:  # keyed by call id (first write wins): safe to run again
            with self._db.transaction() as connection:
                record_tool_call(connection, execution_id, call_id, envelope=redacted)

        rerun("idempotency record", write)
