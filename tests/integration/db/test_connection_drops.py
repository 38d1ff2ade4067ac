"""Each statement kind that is run again after a lost connection, on PostgreSQL, with the
connection it runs on really ended by the server once (``pg_terminate_backend`` of its pid,
right before the statement is sent: :class:`~tests.integration.db_faults.DropOnce`): a read, a
journal append (on the journal's held connection), a lease renewal, an idempotency record. Each
answers as if nothing happened, writes nothing twice, and counts one retry. A lost lease is not
a dropped connection (answered at once, no retry); a statement the database refuses is not
retried; a database never reached is configuration, not a fault."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import SecretStr
from sqlalchemy import func, select, text

from services.cli.config_errors import config_error_line, database_fault_line
from services.db import connection_loss
from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.leases import LeaseStore
from services.db.models import NodeExecution, ToolCallRecord
from services.db.redaction import Redactor
from services.db.session import Database, DatabaseError, create_db_engine
from services.db.step_reads import StepReads
from services.execution.ports import AgentEvent, AgentEventKind
from services.settings import StudioSettings
from tests.integration.db.helpers import new_execution, seqs
from tests.integration.db_faults import DropOnce


@pytest.fixture
def drops(postgres_db: Database, pg_admin: str) -> Iterator[list[DropOnce]]:
    made: list[DropOnce] = []
    yield made
    for drop in made:
        drop.remove()


def _drop(db: Database, admin: str, marker: str, made: list[DropOnce]) -> DropOnce:
    drop = DropOnce(db.engine, admin, marker)
    made.append(drop)
    return drop


def _warm(db: Database) -> None:
    """The pool holds a connection (the one the drop will end)."""
    with db.engine.connect() as connection:
        connection.execute(text("SELECT 1"))


def test_a_read_is_run_again_on_a_fresh_connection(postgres_db: Database, pg_admin: str,
                                                   drops: list[DropOnce]) -> None:
    db = postgres_db
    execution_id = new_execution(db)
    ExecutionRepository(db).request_cancel(execution_id)
    _warm(db)
    drop = _drop(db, pg_admin, "cancel_requested", drops)
    before = connection_loss.retries()
    state = StepReads(db, execution_id, repository="acme/widgets").read("control")
    assert drop.dropped, "the drop never happened: the test would prove nothing"
    assert state.cancel_requested is True
    assert connection_loss.retries() == before + 1


def test_a_journal_append_on_its_held_connection_is_run_again_once(
        postgres_db: Database, pg_admin: str, drops: list[DropOnce]) -> None:
    db = postgres_db
    execution_id = new_execution(db)
    journal = DbEventSink(db, Redactor([]), buffered=True)  # holds its connection
    journal.emit(AgentEvent(AgentEventKind.STARTED, execution_id, 0, {"n": 1}))
    journal.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 1, {
        "call": {"call_id": "c-1", "tool": "command.run", "args": {"argv": ["true"]}}}))
    drop = _drop(db, pg_admin, "studio_journal_commit", drops)
    before = connection_loss.retries()
    journal.emit(AgentEvent(AgentEventKind.MODEL_RESPONSE, execution_id, 1, {"n": 2}))
    journal.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 2, {
        "call": {"call_id": "c-2", "tool": "command.run", "args": {"argv": ["true"]}}}))
    journal.close()
    assert drop.dropped, "the drop never happened: the test would prove nothing"
    assert connection_loss.retries() == before + 1
    assert seqs(db, execution_id) == [1, 2, 3, 4]  # each event once, no gap
    kinds = [e.kind for e in ExecutionRepository(db).events(execution_id)]
    assert kinds == ["started", "tool_call", "model_response", "tool_call"]


def test_a_cut_journal_append_that_landed_is_not_written_again(postgres_db: Database) -> None:
    """The commit's answer lost after it landed: the check before running it again finds its
    events right after the last sequence number written, and it is not run again."""
    db = postgres_db
    execution_id = new_execution(db)
    journal = DbEventSink(db, Redactor([]))
    journal.append(AgentEvent(AgentEventKind.STARTED, execution_id, 0, {"n": 1}))
    committer = journal._pg
    assert committer is not None
    sent = [{"kind": "warning", "cycle": 3, "data": {"code": "x", "message": "m"}}]
    assert committer.landed(execution_id, sent, before=1) is None  # not there yet
    journal.append(AgentEvent(AgentEventKind.WARNING, execution_id, 3,
                              {"code": "x", "message": "m"}))
    assert committer.landed(execution_id, sent, before=1) == 2  # landed: keyed by seq 2
    assert committer.landed(execution_id, sent, before=None) == 2  # the journal's last events
    other = [{"kind": "warning", "cycle": 3, "data": {"code": "x", "message": "other"}}]
    assert committer.landed(execution_id, other, before=1) is None
    assert committer.landed(execution_id, sent, before=2) is None  # after it: not this one


def test_a_lease_renewal_reconnects_and_renews(postgres_db: Database, pg_admin: str,
                                               drops: list[DropOnce]) -> None:
    db = postgres_db
    store = LeaseStore(db)
    execution_id = new_execution(db)
    epoch = store.claim(execution_id, "holder", ttl_s=5)
    assert epoch is not None
    _warm(db)
    drop = _drop(db, pg_admin, "SET lease_expires_at", drops)
    before = connection_loss.retries()
    assert store.heartbeat(execution_id, "holder", epoch, ttl_s=600) is True
    assert drop.dropped, "the drop never happened: the test would prove nothing"
    assert connection_loss.retries() == before + 1
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.lease_expires_at is not None
    with db.session() as session:
        left = session.execute(select(
            NodeExecution.lease_expires_at - func.now()).where(
            NodeExecution.id == execution_id)).scalar_one()
    assert left.total_seconds() > 60  # the 600 s renewal, not the 5 s claim


def test_a_lost_lease_is_answered_at_once_without_a_retry(postgres_db: Database) -> None:
    db = postgres_db
    store = LeaseStore(db)
    execution_id = new_execution(db)
    epoch = store.claim(execution_id, "holder", ttl_s=60)
    assert epoch is not None
    before = connection_loss.retries()
    assert store.heartbeat(execution_id, "someone-else", epoch, ttl_s=60) is False
    assert store.heartbeat(execution_id, "holder", epoch + 1, ttl_s=60) is False
    assert connection_loss.retries() == before


def test_an_idempotency_record_is_written_again_once(postgres_db: Database, pg_admin: str,
                                                     drops: list[DropOnce]) -> None:
    db = postgres_db
    execution_id = new_execution(db)
    store = DbIdempotencyStore(db, Redactor([]))
    _warm(db)
    drop = _drop(db, pg_admin, "INSERT INTO tool_calls", drops)
    before = connection_loss.retries()
    envelope = {"ok": True, "call_id": "c-1", "domain": "command", "operation": "run",
                "data": {"exit_code": 0}}
    store.put(execution_id, "c-1", envelope)
    assert drop.dropped, "the drop never happened: the test would prove nothing"
    assert connection_loss.retries() == before + 1
    assert DbIdempotencyStore(db, Redactor([])).get(execution_id, "c-1") == envelope
    with db.session() as session:
        assert session.execute(select(func.count()).select_from(ToolCallRecord).where(
            ToolCallRecord.execution_id == execution_id)).scalar_one() == 1


def test_a_refused_statement_is_not_retried(postgres_db: Database) -> None:
    before = connection_loss.retries()
    with pytest.raises(DatabaseError):
        postgres_db.read("a bad read", lambda c: c.execute(text("SELECT no_such_column")).all())
    assert connection_loss.retries() == before


def test_the_cli_tells_a_lost_database_from_configuration(postgres_db: Database,
                                                          pg_admin: str) -> None:
    """Once this process has reached its database, losing it is a fault while running (its own
    line, with the retries counted), not a configuration problem; a server never reached still
    gets the configuration line. Neither shows the password of the URL."""
    unreachable = Database(create_db_engine(
        "postgresql+psycopg://studio:hunter2-Secret@127.0.0.1:1/nowhere"))
    try:
        with pytest.raises(DatabaseError) as never:
            unreachable.ping()
    finally:
        unreachable.dispose()
    assert connection_loss.reached_before()  # the session's database was reached
    settings = StudioSettings(database_url=SecretStr(
        "postgresql://studio:hunter2-Secret@127.0.0.1:1/nowhere"))
    lost = connection_loss.ConnectionLost("journal append", 7, "server closed the connection")
    line = database_fault_line(lost, settings)
    assert line == ("studio: database connection lost during the run; retried "
                    f"{connection_loss.retries()} times (journal append: server closed the "
                    "connection)")
    config = config_error_line(never.value, settings)
    assert config is not None and config.startswith("studio: STUDIO_DATABASE_URL: cannot connect")
    assert "hunter2-Secret" not in config and "hunter2-Secret" not in (line or "")


def test_the_fault_line_is_one_line_without_the_password(postgres_db: Database) -> None:
    """Hostile reasons: the URL's password, a second line, a terminal escape; the line shows
    none of them beyond its first line, and the password never."""
    _warm(postgres_db)  # this process has reached its database
    settings = StudioSettings(database_url=SecretStr(
        "postgresql://studio:hunter2-Secret@db.internal:5432/studio"))
    lost = connection_loss.ConnectionLost(
        "journal append", 2, "password hunter2-Secret \x1b[2Jrefused\nsecond line")
    line = database_fault_line(lost, settings)
    assert line is not None and "\n" not in line and "\x1b" not in line, line
    assert "hunter2-Secret" not in line and "***" in line and "second line" not in line
    assert database_fault_line(ValueError("hunter2-Secret"), settings) is None  # not a fault
