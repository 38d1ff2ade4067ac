"""The database-backed idempotency store."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.redaction import REDACTED, Redactor
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.db.helpers import new_execution


def _envelope(call_id: str, text: str) -> dict[str, object]:
    return {"ok": True, "call_id": call_id, "tool_name": "workspace_write_file",
            "domain": "workspace", "operation": "write_file", "duration_ms": 2.0,
            "request_id": "r", "correlation_id": "c", "result": {"text": text}}


def test_put_then_get_and_first_put_wins(db: Database) -> None:
    execution_id = new_execution(db)
    store = DbIdempotencyStore(db, Redactor())
    assert store.get(execution_id, "1-0") is None
    first = _envelope("1-0", "first")
    store.put(execution_id, "1-0", first)
    assert store.get(execution_id, "1-0") == first
    store.put(execution_id, "1-0", _envelope("1-0", "second"))
    assert store.get(execution_id, "1-0") == first
    assert store.get(execution_id, "1-1") is None
    assert store.get(new_execution(db), "1-0") is None
    (record,) = ExecutionRepository(db).tool_calls(execution_id)
    assert (record.tool_name, record.ok, record.domain) == ("workspace_write_file", True,
                                                             "workspace")


def test_recorded_envelope_is_redacted(db: Database) -> None:
    execution_id = new_execution(db)
    store = DbIdempotencyStore(db, Redactor(["s3cr3t-value-123"]))
    store.put(execution_id, "1-0", _envelope("1-0", "saw s3cr3t-value-123"))
    recorded = store.get(execution_id, "1-0")
    assert recorded is not None
    assert recorded["result"] == {"text": f"saw {REDACTED}"}


def test_a_new_call_costs_no_read_and_earlier_records_are_found(db: Database) -> None:
    from tests.integration.db.test_step_reads import statements

    execution_id = new_execution(db)
    earlier = DbIdempotencyStore(db, Redactor())  # an earlier attempt's process
    earlier.put(execution_id, "1-0", _envelope("1-0", "first"))
    store = DbIdempotencyStore(db, Redactor())
    assert store.get(execution_id, "1-0") == _envelope("1-0", "first")  # read on resume
    with statements(db.engine) as sent:
        assert store.get(execution_id, "2-0") is None
        assert store.get(execution_id, "3-0") is None
    assert not [s for s in sent if s.lstrip().upper().startswith("SELECT")], sent
    store.put(execution_id, "2-0", _envelope("2-0", "second"))
    assert store.get(execution_id, "2-0") == _envelope("2-0", "second")  # its own, read back


class _NoRepeats:
    """A write that never says it repeats: the record written as before this was skipped."""

    def __init__(self, write: Any) -> None:
        self.write = write

    def apply(self, connection: Any, known_blobs: set[str] | None = None) -> None:
        self.write.apply(connection, known_blobs)

    def as_ops(self, blobs: dict[str, bytes]) -> list[dict[str, Any]]:
        return list(self.write.as_ops(blobs))


def _record_like_a_loop(db: Database, execution_id: str, big: str, skip: bool) -> list[Any]:
    """The loop's order: the call's event, the store's record (deferred), then the result's
    event, which commits both; answers the evidence row as stored."""
    sink = DbEventSink(db, Redactor(["opaque-secret-9"]), buffered=True)
    store = DbIdempotencyStore(db, sink.redactor, journal=sink)
    call = {"call_id": "1-0", "tool_name": "workspace_write_file", "domain": "workspace",
            "operation": "write_file", "args": {"path": "a", "text": big}}
    envelope = _envelope("1-0", big + " opaque-secret-9")
    sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 2, {"call": call}))
    store.put(execution_id, "1-0", envelope)
    if not skip:
        sink._writes = [(e, _NoRepeats(w)) for e, w in sink._writes]
    sink.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, 2, {
        "call": call, "envelope": sink.redactor.data(envelope), "provider": "codex"}))
    sink.close()
    (record,) = ExecutionRepository(db).tool_calls(execution_id)
    return [record.tool_name, record.domain, record.operation, record.cycle, record.provider,
            record.args, record.envelope, record.ok, record.duration_ms, record.request_id,
            record.correlation_id, record.error_code]


def test_the_record_of_a_call_the_result_event_carries_is_written_once(db: Database) -> None:
    """The store's record of a call rides with the call's ``tool_result`` commit; the event
    writes the same envelope first, so the record is not written again: the row is the one
    both writes made, and (SQLite, where statements can be seen) one upsert fewer."""
    big = "x" * 5000  # a blob too
    upserts: list[int] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.startswith("INSERT INTO tool_calls"):
            upserts.append(1)

    rows = []
    for skip in (True, False):
        event.listen(db.engine, "before_cursor_execute", count)
        try:
            rows.append(_record_like_a_loop(db, new_execution(db), big, skip))
        finally:
            event.remove(db.engine, "before_cursor_execute", count)
        upserts.append(0)
    assert rows[0] == rows[1]
    assert rows[0][6]["result"]["text"] == big + " " + REDACTED
    if db.dialect == "sqlite":
        assert upserts == [1, 1, 0, 1, 1, 1, 0]  # the call's, the result's | and the record's
