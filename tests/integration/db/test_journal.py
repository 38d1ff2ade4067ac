"""The event journal: gap-free sequence numbers, evidence rows, redaction, crash safety."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink, StaleLease
from services.db.models import NodeExecution
from services.db.redaction import REDACTED, Redactor
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.databases import url_of
from tests.integration.db.helpers import all_rows_text, new_execution, seqs
from tests.integration.db.workers import payload, write_events
from tests.support.redaction import settings_redactor

TOKEN = "ghp_" + "Q7f3kZ9xLm2Pq8Rt5Vw1Ys4Ub6Nc0Hd7Je3"
SPAWN = multiprocessing.get_context("spawn")


def _event(kind: AgentEventKind, execution_id: str, at: int, **data: object) -> AgentEvent:
    return AgentEvent(kind, execution_id, at, dict(data))


def test_sequence_starts_at_one_and_counts_per_execution(db: Database) -> None:
    first, second = new_execution(db), new_execution(db)
    sink = DbEventSink(db, settings_redactor())
    assert [sink.append(_event(AgentEventKind.STARTED, first, 0)) for _ in range(3)] == [1, 2, 3]
    assert sink.append(_event(AgentEventKind.STARTED, second, 0)) == 1
    assert seqs(db, first) == [1, 2, 3]


def test_concurrent_writers_leave_no_gap(db: Database) -> None:
    execution_id = new_execution(db)
    writers, count = 3, 30
    barrier = SPAWN.Barrier(writers)
    procs = [SPAWN.Process(target=write_events, args=(url_of(db), execution_id, w, count, barrier))
             for w in range(writers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    assert seqs(db, execution_id) == list(range(1, writers * count + 1))
    events = ExecutionRepository(db).events(execution_id)
    for writer in range(writers):  # each writer's own events keep their order
        order = [e.data["index"] for e in events if e.data["writer"] == writer]
        assert order == list(range(count))


def test_sigkill_mid_write_leaves_committed_events_intact(db: Database) -> None:
    execution_id = new_execution(db)
    proc = SPAWN.Process(target=write_events, args=(url_of(db), execution_id, 7, -1, None))
    proc.start()
    repo = ExecutionRepository(db, settings_redactor())
    deadline = time.monotonic() + 120
    while len(seqs(db, execution_id)) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.pid is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(30)
    assert proc.exitcode == -signal.SIGKILL
    events = repo.events(execution_id)
    assert len(events) >= 40
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    for event in events:
        assert event.data == payload(7, event.data["index"])
        assert event.data["index"] == event.seq - 1
    with db.session() as session:  # the counter agrees with the journal: the next write goes on
        row = session.get(NodeExecution, execution_id)
        assert row is not None and row.event_seq == len(events)
    assert DbEventSink(db, settings_redactor()).append(_event(AgentEventKind.FINISHED,
                                                              execution_id, 0)) == \
        len(events) + 1


def test_tool_events_write_evidence(db: Database) -> None:
    execution_id = new_execution(db)
    sink = DbEventSink(db, settings_redactor())
    call = {"call_id": "1-0", "tool_name": "workspace_read_file", "domain": "workspace",
            "operation": "read_file", "args": {"path": "README.md"}}
    envelope = {"ok": False, "call_id": "1-0", "tool_name": "workspace_read_file",
                "domain": "workspace", "operation": "read_file", "duration_ms": 1.5,
                "error": {"code": "path_not_found", "message": "no such file", "details": {},
                          "retryable": False, "request_id": "r1", "correlation_id": "c1"}}
    sink.emit(_event(AgentEventKind.TOOL_CALL, execution_id, 1, call=call, cycle=1,
                     provider="codex"))
    pending = ExecutionRepository(db).tool_calls(execution_id)
    assert [(c.call_id, c.ok, c.envelope) for c in pending] == [("1-0", None, None)]
    sink.emit(_event(AgentEventKind.TOOL_RESULT, execution_id, 1, call=call, envelope=envelope,
                     cycle=1, provider="codex"))
    (record,) = ExecutionRepository(db).tool_calls(execution_id)
    assert (record.provider, record.cycle, record.domain, record.operation) == \
        ("codex", 1, "workspace", "read_file")
    assert (record.ok, record.error_code, record.duration_ms) == (False, "path_not_found", 1.5)
    assert (record.request_id, record.correlation_id) == ("r1", "c1")
    assert record.args == {"path": "README.md"}
    assert record.envelope == envelope


def test_secrets_are_redacted_in_events_args_and_envelopes(db: Database) -> None:
    execution_id = new_execution(db)
    sink = DbEventSink(db, Redactor([TOKEN]))
    call = {"call_id": "c1", "tool_name": "command_run", "domain": "command", "operation": "run",
            "args": {"argv": ["curl", "-H", f"Authorization: token {TOKEN}"],
                     "env": {"API_TOKEN": "opaque-but-named-secret"}}}
    envelope = {"ok": True, "call_id": "c1", "tool_name": "command_run", "domain": "command",
                "operation": "run", "duration_ms": 3.0, "request_id": "r", "correlation_id": "c",
                "result": {"exit_code": 0, "stdout": f"token is {TOKEN}\n", "stderr": ""}}
    sink.emit(_event(AgentEventKind.MODEL_RESPONSE, execution_id, 1, text=f"use {TOKEN} now"))
    sink.emit(_event(AgentEventKind.TOOL_CALL, execution_id, 1, call=call, cycle=1))
    sink.emit(_event(AgentEventKind.TOOL_RESULT, execution_id, 1, call=call, envelope=envelope,
                     cycle=1))
    stored = all_rows_text(db)
    assert TOKEN not in stored
    assert "opaque-but-named-secret" not in stored
    (record,) = ExecutionRepository(db).tool_calls(execution_id)
    assert record.envelope is not None and record.args is not None
    assert record.envelope["result"]["stdout"] == f"token is {REDACTED}\n"
    assert record.args["env"] == {"API_TOKEN": REDACTED}
    assert ExecutionRepository(db).events(execution_id)[0].data == {"text": f"use {REDACTED} now"}


def test_stale_lease_epoch_writes_nothing(db: Database) -> None:
    execution_id = new_execution(db)
    DbEventSink(db, settings_redactor(), lease_epoch=0).emit(_event(AgentEventKind.STARTED,
                                                                    execution_id, 0))
    with db.session() as session:
        row = session.get(NodeExecution, execution_id)
        assert row is not None
        row.lease_epoch = 1
    with pytest.raises(StaleLease):
        DbEventSink(db, settings_redactor(), lease_epoch=0).emit(_event(AgentEventKind.STARTED,
                                                                        execution_id, 0))
    assert seqs(db, execution_id) == [1]
    assert DbEventSink(db, settings_redactor(),
                       lease_epoch=1).append(_event(AgentEventKind.STARTED, execution_id, 0)) \
        == 2
