"""The loop's shared read before each call (:mod:`services.db.step_reads`), on SQLite and
PostgreSQL: one statement answers the run control, the limits and the budget; each check still
sees the database as it is at the check, never a value it has already seen."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event, update

from services.db.budget import DbBudget
from services.db.control import DbRunControl
from services.db.idempotency import DbIdempotencyStore
from services.db.journal import DbEventSink
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.errors import ErrorCode
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.db.helpers import new_execution
from tests.support.redaction import settings_redactor

REPO = "acme/widgets"


@contextmanager
def statements(*engines: Engine) -> Iterator[list[str]]:
    """Every statement sent on ``engines`` meanwhile."""
    sent: list[str] = []

    def listener(_conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        sent.append(text)

    for engine in engines:
        event.listen(engine, "before_cursor_execute", listener)
    try:
        yield sent
    finally:
        for engine in engines:
            event.remove(engine, "before_cursor_execute", listener)


def _reads(db: Database, execution_id: str) -> tuple[StepReads, DbRunControl, DbBudget]:
    reads = StepReads(db, execution_id, REPO)
    return (reads, DbRunControl(db, execution_id, reads=reads),
            DbBudget(db, execution_id, REPO, 1.0, reads=reads))


def _cancel(db: Database, execution_id: str) -> None:
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                        .values(cancel_requested=True))


def test_a_model_call_check_is_one_statement(db: Database) -> None:
    execution_id = new_execution(db)
    reads, control, budget = _reads(db, execution_id)
    SettingsRepository(db).set("max_iterations", 7)
    settings = SettingsRepository(db)
    with statements(db.engine) as sent:  # (the read engine is its derivative)
        # what the engine does before a model call: control, limits, budget
        assert control.check() is None
        limits = settings.limits({}, stored=reads.read("limits").settings)
        assert budget.check() is None
        # and before a tool call: control, budget
        assert control.check() is None
        assert budget.check() is None
    selects = [s for s in sent if s.lstrip().upper().startswith("SELECT")]
    assert len(selects) == 2, sent
    assert reads.statements == 2
    assert limits["max_iterations"] == 7


def test_the_control_always_reads_afresh(db: Database) -> None:
    execution_id = new_execution(db)
    reads, control, _ = _reads(db, execution_id)
    assert control.check() is None
    SettingsRepository(db).set("killswitch_engaged", True)
    assert control.check() is ErrorCode.KILLSWITCH_ENGAGED
    SettingsRepository(db).set("killswitch_engaged", False)
    assert control.check() is None
    _cancel(db, execution_id)
    assert control.check() is ErrorCode.CANCELLED
    assert reads.statements == 4


def test_a_consumer_never_sees_the_same_snapshot_twice(db: Database) -> None:
    execution_id = new_execution(db)
    reads, control, budget = _reads(db, execution_id)
    assert control.check() is None
    assert budget.check() is None  # shares the control's read
    journal = DbEventSink(db, settings_redactor(), buffered=False)
    DbBudget(db, execution_id, REPO, 1.0, journal=journal).charge(2.0)  # overflows the day
    assert budget.check() is ErrorCode.BUDGET_EXCEEDED  # a second check reads anew
    assert reads.statements == 2


def test_an_old_snapshot_is_not_shared(db: Database) -> None:
    execution_id = new_execution(db)
    reads = StepReads(db, execution_id, REPO, max_age_s=0.0)
    budget = DbBudget(db, execution_id, REPO, 1.0, reads=reads)
    DbRunControl(db, execution_id, reads=reads).check()
    budget.check()
    assert reads.statements == 2


def test_without_shared_reads_the_control_is_one_statement(db: Database) -> None:
    execution_id = new_execution(db)
    control = DbRunControl(db, execution_id)
    with statements(db.engine) as sent:  # (the read engine is its derivative)
        assert control.check() is None
    assert len([s for s in sent if s.lstrip().upper().startswith("SELECT")]) == 1
    SettingsRepository(db).set("killswitch_engaged", True)
    assert control.check() is ErrorCode.KILLSWITCH_ENGAGED
    SettingsRepository(db).set("killswitch_engaged", False)
    _cancel(db, execution_id)
    assert control.check() is ErrorCode.CANCELLED


def test_an_unknown_execution_and_empty_settings_read_as_defaults(db: Database) -> None:
    reads = StepReads(db, "no-such-execution", "no/such-repo")
    state = reads.read("control")
    assert (state.cancel_requested, state.spent_micros, state.overflow_micros) == (False, 0, 0)
    assert state.settings == {}
    assert DbRunControl(db, "no-such-execution").check() is None


def test_stored_settings_of_any_shape_are_read_as_stored(db: Database) -> None:
    """A value written by an older release or by hand (a string where a bool is expected)
    does not engage the kill switch: only ``true`` does."""
    execution_id = new_execution(db)
    from services.db.models import RuntimeSetting

    with db.session() as session:
        session.add(RuntimeSetting(key="killswitch_engaged", value="true"))
        session.add(RuntimeSetting(key="unknown_key'; DROP TABLE x; --", value={"a": [1]}))
    reads, control, _ = _reads(db, execution_id)
    assert control.check() is None
    settings = reads.read("limits").settings
    assert settings["unknown_key'; DROP TABLE x; --"] == {"a": [1]}
    assert settings["killswitch_engaged"] == "true"


def test_a_put_given_the_journal_rides_its_next_commit(db: Database) -> None:
    execution_id = new_execution(db)
    journal = DbEventSink(db, Redactor(["s3cr3t-value-123"]), buffered=True)
    store = DbIdempotencyStore(db, Redactor(["s3cr3t-value-123"]), journal=journal)
    envelope = {"ok": True, "call_id": "1-0", "tool_name": "command_run", "domain": "command",
                "operation": "run", "duration_ms": 1.0, "request_id": "r",
                "correlation_id": "c", "result": {"stdout": "saw s3cr3t-value-123"}}
    store.put(execution_id, "1-0", envelope)
    assert store.get(execution_id, "1-0") is None  # not yet committed
    journal.emit(AgentEvent(AgentEventKind.TOOL_RESULT, execution_id, 1,
                            {"call": {"call_id": "1-0"}, "envelope": envelope}))
    recorded = store.get(execution_id, "1-0")
    assert recorded is not None and "s3cr3t" not in str(recorded)
    store.put(execution_id, "1-0", {**envelope, "result": {"stdout": "second"}})
    journal.flush()
    assert store.get(execution_id, "1-0") == recorded  # the first put still wins
