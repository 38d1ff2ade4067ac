"""The database-backed idempotency store."""

from __future__ import annotations

from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.redaction import REDACTED, Redactor
from services.db.session import Database
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
