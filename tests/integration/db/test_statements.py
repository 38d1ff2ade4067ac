"""The statements of a loop's step run compiled once, on the DBAPI cursor (SQLite's and
psycopg's: :mod:`services.db.statements`): the same rows written and read as through
SQLAlchemy's execution, which they no longer go through."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

import pytest
from sqlalchemy import Connection, event, exc, text, update

from services.db import budget, connection_loss, evidence, journal, step_reads, team_budget
from services.db.base import utcnow
from services.db.journal import DbEventSink
from services.db.models import NodeExecution, Team
from services.db.session import Database
from services.db.statements import Result, Statement
from services.db.step_reads import StepReads
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.db.helpers import new_execution, seqs
from tests.integration.db_faults import terminate_backend
from tests.support.redaction import settings_redactor


@contextmanager
def _through_core(db: Database) -> Iterator[list[str]]:
    """While it lasts, something listens to the statements: they go through SQLAlchemy's
    execution (and are seen)."""
    seen: list[str] = []

    def listen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        seen.append(statement)

    event.listen(db.engine, "before_cursor_execute", listen)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", listen)


def _both_ways(db: Database, run: Callable[[Connection], Any]) -> tuple[Any, Any]:
    """``run`` in a transaction on the cursor and in one through Core, each rolled back;
    answers both results (with every row of the database as each left it)."""
    answers = []
    for core in (False, True):
        with db.engine.connect() as connection:
            if core:
                event.listen(connection, "before_cursor_execute", lambda *_: None)
            with connection.begin() as transaction:
                answered = run(connection)
                rows = [tuple(r) for r in connection.execute(text(
                    "SELECT * FROM execution_events ORDER BY 1, 2"))]
                every = [sorted((tuple(r) for r in connection.execute(text(
                    f"SELECT * FROM {t}"))), key=repr)
                         for t in ("node_executions", "tool_calls", "budget_ledger",
                                   "team_spend", "execution_events")]
                answers.append((answered, rows, every))
                transaction.rollback()
    return answers[0], answers[1]


def _typed(value: Any) -> Any:
    """``value`` with the type of every leaf (``1 == True`` and ``Decimal == float`` would hide
    a difference)."""
    if isinstance(value, Result):
        return _typed(value.rows), value.rowcount
    if isinstance(value, list | tuple):
        return [_typed(v) for v in value]
    return type(value).__name__, value


def test_each_statement_writes_and_answers_as_through_core(db: Database) -> None:
    """On SQLite and on PostgreSQL (psycopg's cursor, named parameters)."""
    execution_id = new_execution(db)
    with db.session() as session:
        team = Team(name="statements", monthly_budget_usd=12.5, notify_url="https://h/x")
        session.add(team)
        session.flush()
        team_id = team.id
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id).values(
            team_id=team_id))
    now = utcnow()
    day, month = date(2026, 11, 29), "2026-11"
    evidence_params = {f"p_{key}": None for key in evidence._COLUMNS}
    evidence_params.update(p_execution_id=execution_id, p_call_id="c1", p_created_at=now,
                           p_cycle=3, p_tool_name="command_run", p_domain="command",
                           p_operation="run", p_args={"argv": ["true"]},
                           p_envelope={"ok": True, "result": {"exit_code": 0}}, p_ok=True,
                           p_duration_ms=1.5, p_finished_at=now, p_provider="codex")

    def run(connection: Connection) -> list[Any]:
        seq = journal._BUMP_SEQ.execute(connection, {"p_id": execution_id, "p_count": 2,
                                                     "p_now": now})
        journal._INSERT_EVENTS.execute_many(connection, [
            {"execution_id": execution_id, "seq": n, "kind": "usage", "cycle": 1,
             "data": {"n": n, "none": None, "text": "é"}, "created_at": now} for n in (1, 2)])
        evidence._statement(connection).execute(connection, evidence_params)
        evidence._statement(connection).execute(connection, {**evidence_params,
                                                             "p_envelope": None})
        key = {"p_repository": "acme/app", "p_day": day}
        budget._ensure_row(connection).execute(connection, {**key, "p_now": now})
        admitted = budget._ADMIT_STATEMENT.execute(connection, {
            **key, "p_micros": 5, "p_limit": 3, "p_now": now})
        overflow = budget._OVERFLOW_STATEMENT.execute(connection, {
            **key, "p_micros": 5, "p_now": now})
        team_key = {"p_team": team_id, "p_month": month}
        team = team_budget._TEAM_STATEMENT.execute(connection, team_key)
        team_budget._ensure_month(connection).execute(connection, {**team_key, "p_now": now})
        team_admitted = team_budget._ADMIT_STATEMENT.execute(connection, {
            **team_key, "p_micros": 7, "p_limit": 100, "p_now": now})
        team_overflow = team_budget._OVERFLOW_STATEMENT.execute(connection, {
            **team_key, "p_micros": 7, "p_now": now})
        read = step_reads._READ_STATEMENT.execute(connection, {
            "p_id": execution_id, "p_repository": "acme/app", "p_day": day, "p_month": month})
        return [seq, admitted, overflow, team, team_admitted, team_overflow, read]

    direct, core = _both_ways(db, run)
    assert _typed(direct) == _typed(core)
    answered = direct[0]
    assert answered[3].rows[0][2] is not None and answered[6].rows  # positive control
    assert answered[6].rows[0][0] is False  # the Boolean's result processor ran


def _loop_steps(db: Database, sink: DbEventSink, execution_id: str, reads: StepReads) -> None:
    for cycle in range(5):
        reads.read("control")
        reads.read("control")
        call = {"call_id": f"c{cycle}", "tool_name": "command_run", "domain": "command",
                "operation": "run", "args": {"argv": ["true", str(cycle)]}}
        sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, cycle, {"call": call}))
        sink.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, cycle, {
            "call": call, "envelope": {"ok": True, "call_id": f"c{cycle}",
                                       "result": {"exit_code": 0}}, "provider": "codex"}))


def test_a_loop_step_runs_no_statement_through_sqlalchemy_execution(
        sqlite_db: Database) -> None:
    """A buffered journal's steps on SQLite: none of their statements goes through
    ``Connection.execute`` (SQLAlchemy's ``before_execute`` sees none), and each statement was
    compiled once; with a statement listener they all do (the values are compared above)."""
    db = sqlite_db
    executed: list[Any] = []
    texts: list[int] = []
    watched = (journal._BUMP_SEQ, journal._INSERT_EVENTS, step_reads._READ_STATEMENT)
    compiled_before = [statement.compilations for statement in watched]
    for core in (False, True):
        execution_id = new_execution(db)
        sink = DbEventSink(db, settings_redactor(), buffered=True)
        reads = StepReads(db, execution_id, "acme/app")
        sink.read_with(reads)

        def count(_conn: Any, clause: Any, *_: Any) -> None:
            executed.append(clause)

        event.listen(db.engine, "before_execute", count)
        try:
            if core:
                with _through_core(db) as seen:
                    _loop_steps(db, sink, execution_id, reads)
                assert len(seen) >= 5 * 7  # positive control: the listener sees them
            else:
                _loop_steps(db, sink, execution_id, reads)
                assert executed == []
        finally:
            event.remove(db.engine, "before_execute", count)
            sink.close()
        texts.append(len(seqs(db, execution_id)))
    assert executed  # through Core, SQLAlchemy executed them
    assert [s.compilations - n for s, n in zip(watched, compiled_before, strict=True)] == [1] * 3
    assert texts[0] == texts[1] == 10  # both wrote every event


def test_a_database_error_is_raised_as_sqlalchemy_raises_it(db: Database) -> None:
    execution_id = new_execution(db)
    row = {"execution_id": execution_id, "seq": 1, "kind": "usage", "cycle": 0, "data": {},
           "created_at": utcnow()}
    for core in (False, True):
        with db.engine.connect() as connection:
            if core:
                event.listen(connection, "before_cursor_execute", lambda *_: None)
            with pytest.raises(exc.IntegrityError), connection.begin():
                journal._INSERT_EVENTS.execute_many(connection, [row, row])


def test_a_python_side_default_is_refused(sqlite_db: Database) -> None:
    execution_id = new_execution(sqlite_db)
    statement = Statement(update(NodeExecution.__table__).where(  # type: ignore[arg-type]
        NodeExecution.__table__.c.id == execution_id).values(event_seq=0))
    with sqlite_db.engine.begin() as connection, pytest.raises(ValueError, match="default"):
        statement.execute(connection, {})


def test_a_loop_step_on_postgresql_runs_no_statement_through_sqlalchemy_execution(
        postgres_db: Database) -> None:
    """A buffered journal's steps on PostgreSQL: the commit function's calls and the reads
    before the calls go to psycopg's cursor (SQLAlchemy's ``before_execute`` sees none; on main
    both went through it); with a statement listener they all go through SQLAlchemy and are
    seen. Both ways write the same events and read the same state."""
    db = postgres_db
    executed: list[Any] = []
    written: list[list[tuple[Any, ...]]] = []
    states: list[Any] = []
    compiled_before = step_reads._READ_STATEMENT.compilations
    for core in (False, True):
        execution_id = new_execution(db)
        sink = DbEventSink(db, settings_redactor(), buffered=True)
        reads = StepReads(db, execution_id, "acme/app")
        sink.read_with(reads)

        def count(_conn: Any, clause: Any, *_: Any) -> None:
            executed.append(clause)

        event.listen(db.engine, "before_execute", count)
        try:
            if core:
                with _through_core(db) as seen:
                    _loop_steps(db, sink, execution_id, reads)
                calls = [s for s in seen if "studio_journal_commit" in s]
                assert len(calls) == 10 and len(seen) >= 15  # positive control
            else:
                _loop_steps(db, sink, execution_id, reads)
                assert executed == []
        finally:
            event.remove(db.engine, "before_execute", count)
            sink.close()
        states.append((reads.latest.cancel_requested, reads.latest.settings)
                      if reads.latest is not None else None)
        with db.engine.connect() as connection:
            written.append([tuple(r) for r in connection.execute(text(
                "SELECT seq, kind, cycle, data::text FROM execution_events "
                "WHERE execution_id = :id ORDER BY seq"), {"id": execution_id})])
    assert executed  # through Core, SQLAlchemy executed them
    assert step_reads._READ_STATEMENT.compilations - compiled_before == 1
    assert len(written[0]) == 10 and written[0] == written[1]
    assert states[0] == states[1] == (False, {})


def test_a_connection_lost_under_the_cursor_is_invalidated_as_through_core(
        postgres_db: Database, pg_admin: str) -> None:
    """The server ends the session a statement runs on: on the cursor as through Core, the
    error says the connection was invalidated (what ``connection_loss.rerun`` runs again on)
    and the connection is not given back to the pool as it was."""
    db = postgres_db
    execution_id = new_execution(db)
    params = {"p_id": execution_id, "p_repository": "acme/app", "p_day": date(2026, 11, 29),
              "p_month": "2026-11"}
    for core in (False, True):
        with db.engine.connect() as connection:
            if core:
                event.listen(connection, "before_cursor_execute", lambda *_: None)
            pid = connection.connection.dbapi_connection.info.backend_pid  # type: ignore[union-attr]
            terminate_backend(pg_admin, pid)
            with pytest.raises(exc.DBAPIError) as raised:
                step_reads._READ_STATEMENT.execute(connection, params)
            assert raised.value.connection_invalidated, core
            assert connection.invalidated, core
            assert connection_loss.is_connection_lost(raised.value)
        with db.engine.connect() as connection:  # the pool's next connection works
            assert step_reads._READ_STATEMENT.execute(connection, params).rows


def test_a_journal_commit_cut_on_the_cursor_is_run_again_once(postgres_db: Database,
                                                              pg_admin: str) -> None:
    """The journal's held connection ended by the server between two commits: the next commit
    (on psycopg's cursor, no listener) is run again on a fresh connection, once, and every event
    is written once; the read before the next call works on the fresh connection."""
    db = postgres_db
    execution_id = new_execution(db)
    sink = DbEventSink(db, settings_redactor(), buffered=True)
    reads = StepReads(db, execution_id, "acme/app")
    sink.read_with(reads)
    _loop_steps(db, sink, execution_id, reads)
    committer = sink._pg
    assert committer is not None and committer._conn is not None  # held
    before = connection_loss.retries()
    terminate_backend(pg_admin, committer._conn.connection.dbapi_connection.info.backend_pid)  # type: ignore[union-attr]
    call = {"call_id": "c9", "tool_name": "command_run", "domain": "command",
            "operation": "run", "args": {"argv": ["true"]}}
    sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 9, {"call": call}))
    assert connection_loss.retries() == before + 1
    assert reads.read("control").cancel_requested is False
    sink.close()
    assert seqs(db, execution_id) == list(range(1, 12))
