"""The launcher's check after an execution's child exits (``services.api.launcher``): a journal
whose loop wrote ``finished`` and whose finalization wrote its steps after it is complete; one
that ends without ``finished`` gets it. A second ``finished`` after the final status would be read
after a live stream's ``end`` (a stream reads the row before the journal)."""

from __future__ import annotations

from services.db.executions import ExecutionRepository
from services.db.journal import DbEventSink
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.execution.ports import AgentEvent, AgentEventKind
from services.runs.endings import ensure_finished_event as _ensure_finished_event
from tests.integration.db.helpers import new_execution
from tests.support.redaction import settings_redactor


def _journal(db: Database, execution_id: str, kinds: list[AgentEventKind]) -> None:
    sink = DbEventSink(db, settings_redactor())
    for kind in kinds:
        sink.append(AgentEvent(kind, execution_id, 0, {"step": "push"}))


def _kinds(db: Database, execution_id: str) -> list[str]:
    return [e.kind for e in ExecutionRepository(db).events(execution_id)]


def test_finalize_steps_after_finished_do_not_get_a_second_finished(db: Database) -> None:
    execution_id = new_execution(db)
    steps = [AgentEventKind.STARTED, AgentEventKind.FINISHED, *[AgentEventKind.FINALIZE] * 3]
    _journal(db, execution_id, steps)
    ExecutionRepository(db, settings_redactor()).finish(execution_id,
                                                        status=ExecutionStatus.SUCCEEDED,
                                   outcome="finished")
    _ensure_finished_event(db, execution_id)
    assert _kinds(db, execution_id) == [s.value for s in steps]


def test_a_journal_without_finished_gets_one(db: Database) -> None:
    execution_id = new_execution(db)
    _journal(db, execution_id, [AgentEventKind.STARTED, AgentEventKind.FINALIZE])
    ExecutionRepository(db, settings_redactor()).finish(execution_id, status=ExecutionStatus.FAILED,
                                                        outcome="error")
    _ensure_finished_event(db, execution_id)
    assert _kinds(db, execution_id)[-1] == "finished"
    _ensure_finished_event(db, execution_id)  # once
    assert _kinds(db, execution_id).count("finished") == 1
