"""How a run ends when its loop did not end it (``services.runs.endings``), on SQLite and
PostgreSQL: after the process that ran it here ended, an unfinished execution is failed with
``substrate_error`` and its journal ends with exactly one ``finished``; one the kill switch holds,
one waiting for an approval and one a later attempt took are left alone; a lease-fenced ending
from an attempt that lost its lease writes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.journal import StaleLease
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.pauses import PauseStore
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.runs.endings import end_execution, finished_data, run_to_its_end, substrate_failure
from tests.integration.db.helpers import new_execution


def _kinds(db: Database, execution_id: str) -> list[str]:
    return [e.kind for e in ExecutionRepository(db).events(execution_id)]


def _claimed(db: Database, execution_id: str) -> None:
    """What a ``studio execute`` child that died mid-run leaves: claimed, never finished."""
    assert LeaseStore(db).claim(execution_id, "child:1", 300.0) == 1


def _taken_over(db: Database, execution_id: str) -> None:
    """Another attempt claims it once the first lease expired (epoch 2)."""
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                        .values(lease_expires_at=utcnow() - timedelta(seconds=1)))
    assert LeaseStore(db).claim(execution_id, "child:2", 300.0) == 2


def test_a_process_that_died_mid_run_leaves_a_failed_execution_with_one_finished(
        db: Database) -> None:
    execution_id = new_execution(db)
    run_to_its_end(db, lambda eid: _claimed(db, eid), execution_id)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    assert (row.status, row.outcome, row.error_code) == ("failed", "error", "substrate_error")
    assert row.finished_at is not None
    events = ExecutionRepository(db).events(execution_id)
    assert [e.kind for e in events] == ["finished"]
    assert events[0].data == {"status": "failed", "outcome": "error", "error": {
        "code": "substrate_error",
        "message": "the execution's process ended without finishing it"}}
    run_to_its_end(db, lambda _eid: None, execution_id)  # final already: nothing more
    assert _kinds(db, execution_id) == ["finished"]


def test_what_resumes_later_is_left_alone(db: Database) -> None:
    held = new_execution(db)
    assert PauseStore(db).hold(held)  # the kill switch holds it: queued, marked paused
    waiting = new_execution(db)
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == waiting)
                        .values(status=ExecutionStatus.AWAITING_APPROVAL))
    later = new_execution(db)
    for execution_id in (held, waiting):
        run_to_its_end(db, lambda _eid: None, execution_id)
    # a later attempt claimed it meanwhile (its epoch is two past the one this run started at)
    run_to_its_end(db, lambda eid: [_claimed(db, eid), _taken_over(db, eid)], later)
    statuses = {i: ExecutionRepository(db).get(i).status  # type: ignore[union-attr]
                for i in (held, waiting, later)}
    assert statuses == {held: "queued", waiting: "awaiting_approval", later: "claimed"}
    assert not any(_kinds(db, i) for i in (held, waiting, later))


def test_a_fenced_ending_from_a_lost_lease_writes_nothing(db: Database) -> None:
    execution_id = new_execution(db)
    _claimed(db, execution_id)
    _taken_over(db, execution_id)
    fields = substrate_failure("late")
    with pytest.raises(StaleLease):
        end_execution(db, execution_id, fields, finished_data(fields), epoch=1, retry=False)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "claimed" and row.finished_at is None
    assert _kinds(db, execution_id) == []
    end_execution(db, execution_id, fields, finished_data(fields), epoch=2,  # the holder's
                  retry=False)  # (retries: tests/integration/runs/test_retry_endings.py)
    assert ExecutionRepository(db).get(execution_id).status == "failed"  # type: ignore[union-attr]
    assert _kinds(db, execution_id) == ["finished"]
