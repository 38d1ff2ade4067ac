"""A buffered journal on SQLite keeps its two connections for the loop
(:mod:`services.db.journal_sqlite`): the pool is asked once for each, not around every commit and
every read before a call."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event

from services.db.journal import DbEventSink
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.db.helpers import new_execution, seqs
from tests.support.redaction import settings_redactor

STEPS = 10


def _checkouts(db: Database) -> list[int]:
    counted: list[int] = []

    def checkout(*_: Any) -> None:
        counted.append(1)

    event.listen(db.engine, "checkout", checkout)
    return counted


def _steps(db: Database, sink: DbEventSink, execution_id: str, reads: StepReads) -> None:
    """What a loop does a step: the checks before the model call (answered by the last commit's
    read), the read before the tool call, the call's commit, the result's commit (which reads for
    the next model call)."""
    for cycle in range(STEPS):
        reads.read("control")
        assert reads.read("control").cancel_requested is False  # read afresh
        call = {"call_id": f"c{cycle}", "tool_name": "command_run", "args": {"argv": ["true"]}}
        sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, cycle, {"call": call}))
        sink.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, cycle, {
            "call": call, "envelope": {"ok": True, "call_id": f"c{cycle}"}}))


def test_a_buffered_sqlite_journal_asks_the_pool_once_per_connection(sqlite_db: Database) -> None:
    execution_id = new_execution(sqlite_db)
    reads = StepReads(sqlite_db, execution_id, repository="r")
    sink = DbEventSink(sqlite_db, settings_redactor(), buffered=True)
    sink.read_with(reads)
    counted = _checkouts(sqlite_db)
    _steps(sqlite_db, sink, execution_id, reads)
    sink.close()
    assert len(counted) == 2  # its commits' connection and its reads' connection
    assert seqs(sqlite_db, execution_id) == list(range(1, 2 * STEPS + 1))
    assert reads.statements >= STEPS  # the reads were made, over the kept connection


def test_a_write_through_journal_asks_the_pool_for_each_commit(sqlite_db: Database) -> None:
    """Positive control: the same steps through an unbuffered journal (whose reads are the
    pool's own) count a checkout per commit and per read."""
    execution_id = new_execution(sqlite_db)
    reads = StepReads(sqlite_db, execution_id, repository="r")
    sink = DbEventSink(sqlite_db, settings_redactor())
    counted = _checkouts(sqlite_db)
    _steps(sqlite_db, sink, execution_id, reads)
    assert len(counted) >= 3 * STEPS
    assert seqs(sqlite_db, execution_id) == list(range(1, 2 * STEPS + 1))
