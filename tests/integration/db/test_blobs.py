"""Large strings are stored once per execution and read back as they were written."""

from __future__ import annotations

from sqlalchemy import func, select

from services.db.blobs import BLOB_KEY, LITERAL_KEY, MIN_BLOB_BYTES
from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.models import ContentBlob, ExecutionEvent, NodeExecution, ToolCallRecord
from services.db.redaction import REDACTED, Redactor
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.db.helpers import new_execution
from tests.support.redaction import settings_redactor

TOKEN = "ghp_" + "Q7f3kZ9xLm2Pq8Rt5Vw1Ys4Ub6Nc0Hd7Je3"
BIG = "".join(f"line {n}: é ü {n * 7919 % 1000}\n" for n in range(20_000))  # ~600 KB


def _stored_bytes(db: Database, execution_id: str) -> dict[str, int]:
    """The raw size each table holds for the execution (the JSON as stored, blobs compressed)."""
    with db.engine.connect() as conn:
        events = conn.execute(select(ExecutionEvent.data).where(
            ExecutionEvent.execution_id == execution_id)).scalars().all()
        calls = conn.execute(select(ToolCallRecord.args, ToolCallRecord.envelope).where(
            ToolCallRecord.execution_id == execution_id)).all()
        blobs = conn.execute(select(func.count(), func.sum(ContentBlob.size_bytes)).where(
            ContentBlob.execution_id == execution_id)).one()
    return {"events": sum(len(str(e)) for e in events),
            "calls": sum(len(str(a)) + len(str(e)) for a, e in calls),
            "blobs": int(blobs[0]), "blob_bytes": int(blobs[1] or 0)}


def test_a_large_argument_is_stored_once_and_read_back_whole(db: Database) -> None:
    execution_id = new_execution(db)
    sink = DbEventSink(db, settings_redactor(), buffered=True)
    call = {"call_id": "c1", "tool_name": "workspace_write_file", "domain": "workspace",
            "operation": "write_file", "args": {"path": "big.txt", "content": BIG}}
    envelope = {"ok": True, "call_id": "c1", "tool_name": "workspace_write_file",
                "domain": "workspace", "operation": "write_file", "duration_ms": 1.0,
                "request_id": "r", "correlation_id": "c", "result": {"echo": BIG}}
    sink.emit(AgentEvent(AgentEventKind.MODEL_RESPONSE, execution_id, 1,
                         {"tool_calls": [call], "message": {"parts": [call]}}))
    sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 1, {"call": call}))
    sink.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, 1,
                         {"call": call, "envelope": envelope}))
    stored = _stored_bytes(db, execution_id)
    assert stored["blobs"] == 1 and stored["blob_bytes"] == len(BIG.encode())
    assert stored["events"] + stored["calls"] < 5_000  # references only, not five copies
    with db.engine.connect() as conn:
        (data,) = conn.execute(select(ContentBlob.data)).scalars().all()
    assert len(data) < len(BIG.encode()) // 3  # compressed

    events = ExecutionRepository(db).events(execution_id)
    assert events[0].data["tool_calls"][0]["args"]["content"] == BIG
    assert events[0].data["message"]["parts"][0] == call
    assert events[2].data == {"call": call, "envelope": envelope}
    (record,) = ExecutionRepository(db).tool_calls(execution_id)
    assert record.args == call["args"] and record.envelope == envelope
    assert DbIdempotencyStore(db, settings_redactor()).get(execution_id, "c1") == envelope


def test_strings_below_the_threshold_and_lookalike_dicts_are_kept_as_they_are(
        db: Database) -> None:
    execution_id = new_execution(db)
    small = "x" * (MIN_BLOB_BYTES // 4 - 1)
    lookalikes = {"a": {BLOB_KEY: "0" * 64, "size": 3}, "b": {LITERAL_KEY: {"c": 1}},
                  "c": {LITERAL_KEY: 5, "d": [BIG[:MIN_BLOB_BYTES]]}, "small": small}
    DbEventSink(db, settings_redactor()).emit(AgentEvent(AgentEventKind.WARNING, execution_id, 0,
                                                         lookalikes))
    (event,) = ExecutionRepository(db).events(execution_id)
    assert event.data == lookalikes
    assert _stored_bytes(db, execution_id)["blobs"] == 1


def test_blobs_are_redacted_per_execution_and_the_replay_script_is_stored_once(
        db: Database) -> None:
    secret_text = BIG + f"token {TOKEN}\n"
    script = {"turns": [{"tool_calls": [{"tool": "workspace.write_file",
                                         "args": {"path": "a", "content": secret_text}}]}]}
    repo = ExecutionRepository(db, Redactor([TOKEN]))
    first = repo.create(provider="replay", model="m", prompt="p", request={"script": script})
    second = repo.create(provider="replay", model="m", prompt="p", request={"script": script})
    with db.engine.connect() as conn:
        raw = conn.execute(select(NodeExecution.request).where(
            NodeExecution.id == first)).scalar_one()
        per_execution = conn.execute(select(ContentBlob.execution_id, func.count())
                                     .group_by(ContentBlob.execution_id)).all()
    assert len(str(raw)) < 1_000
    assert sorted(n for _, n in per_execution) == [1, 1]  # each execution has its own
    row = repo.get(first)
    assert row is not None
    content = row.request["script"]["turns"][0]["tool_calls"][0]["args"]["content"]
    assert content == BIG + f"token {REDACTED}\n"
    with db.session() as session:  # deleting the execution deletes its blobs
        found = session.get(NodeExecution, second)
        assert found is not None
        session.delete(found)
    with db.engine.connect() as conn:
        left = conn.execute(select(ContentBlob.execution_id).distinct()).scalars().all()
    assert left == [first]
