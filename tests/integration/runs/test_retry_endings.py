"""Retries and the dead-letter queue in the one ending (``services.runs.endings``,
``services.runs.retries``), on SQLite and PostgreSQL: an infrastructure failure under a lease
is queued again with ``retry_at`` and ``last_error`` (and a ``retry`` event), the reaper's
:func:`dispatch_due` sends it once due, the last attempt dead-letters it with every error; a
permanent one fails at once; ``retry`` and ``discard`` are recorded with who and when, and
refused on anything not dead-lettered; the backlog gauges read the waiting states."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.stats import oldest_waiting
from services.runs.endings import end_execution
from services.runs.retries import NotDeadLettered, discard, dispatch_due, redrive
from tests.integration.db.helpers import new_execution


def _failure(code: str) -> dict[str, Any]:
    return {"status": "failed", "outcome": "error", "error_code": code,
            "error_message": f"{code} happened"}


def _attempt(db: Database, execution_id: str, code: str, retry_after: float | None = None) -> str:
    """One attempt: claim, then end with ``code`` under the lease, then release."""
    store = LeaseStore(db)
    with db.session() as session:  # due: a worker took it
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                        .values(retry_at=None))
    epoch = store.claim(execution_id, "child", 60.0)
    assert epoch is not None
    status = end_execution(db, execution_id, _failure(code), {"status": "failed"},
                           epoch=epoch, retry_after=retry_after)
    store.release(execution_id, "child", epoch)
    return status


def _row(db: Database, execution_id: str) -> NodeExecution:
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    return row


def _kinds(db: Database, execution_id: str) -> list[str]:
    return [e.kind for e in ExecutionRepository(db).events(execution_id)]


@pytest.fixture
def tiny(db: Database) -> Database:
    settings = SettingsRepository(db)
    for key, value in (("retry_base_s", 10.0), ("retry_factor", 2.0),
                       ("retry_max_delay_s", 60.0), ("retry_max_attempts", 3)):
        settings.set(key, value)
    return db


def test_infrastructure_failures_are_queued_again_then_dead_lettered(tiny: Database) -> None:
    db = tiny
    execution_id = new_execution(db)
    assert _attempt(db, execution_id, "provider_unavailable") == "queued"
    row = _row(db, execution_id)
    assert row.status == "queued" and row.retry_at is not None and row.finished_at is None
    assert row.error_code is None and row.lease_owner is None
    assert row.last_error is not None and row.last_error["code"] == "provider_unavailable"
    assert row.last_error["kind"] == "infrastructure"
    assert 5.0 <= (row.retry_at - utcnow()).total_seconds() <= 10.0
    assert _kinds(db, execution_id) == ["finished", "retry"]
    shown = ExecutionRepository(db).list(status="queued")[0]
    assert shown.id == execution_id

    assert _attempt(db, execution_id, "mcp_server_crashed", retry_after=40.0) == "queued"
    second = _row(db, execution_id).last_error
    assert second is not None and second["delay_s"] == 40.0  # Retry-After honoured
    assert _attempt(db, execution_id, "integration_unavailable") == "dead_lettered"
    row = _row(db, execution_id)
    assert row.status == "dead_lettered" and row.retry_at is None
    assert [e["code"] for e in row.attempt_errors or []] == [
        "provider_unavailable", "mcp_server_crashed", "integration_unavailable"]
    assert row.error_code == "integration_unavailable"
    assert LeaseStore(db).claim(execution_id, "another", 60.0) is None  # no worker takes it


def test_a_permanent_failure_fails_at_once(tiny: Database) -> None:
    for code in ("provider_rejected", "path_outside_workspace", "spend_cap_reached"):
        execution_id = new_execution(tiny)
        assert _attempt(tiny, execution_id, code) == "failed"
        row = _row(tiny, execution_id)
        assert (row.status, row.error_code, row.retry_at) == ("failed", code, None)
        assert row.attempt_errors is None and _kinds(tiny, execution_id) == ["finished"]


def test_the_reaper_dispatches_a_retry_once_it_is_due(tiny: Database) -> None:
    db = tiny
    due, later = new_execution(db), new_execution(db)
    for execution_id in (due, later):
        _attempt(db, execution_id, "provider_unavailable")
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == due)
                        .values(retry_at=utcnow() - timedelta(seconds=1)))
    sent: list[str] = []
    assert dispatch_due(db, sent.append) == [due]
    assert sent == [due]
    assert dispatch_due(db, sent.append) == []  # stamped: sent once
    assert _row(db, due).status == "queued" and _row(db, later).status == "queued"


def _dead_lettered(db: Database) -> str:
    execution_id = new_execution(db)
    while _attempt(db, execution_id, "provider_unavailable") != "dead_lettered":
        pass
    return execution_id


def test_retry_and_discard_are_recorded_with_who_and_when(tiny: Database) -> None:
    db = tiny
    execution_id = _dead_lettered(db)
    sent: list[str] = []
    before = utcnow()
    redrive(db, execution_id, "ops-alice", sent.append)
    row = _row(db, execution_id)
    assert sent == [execution_id] and row.status == "queued"
    actions = row.operator_actions or []
    assert [(a["action"], a["by"]) for a in actions] == [("retry", "ops-alice")]
    assert datetime.fromisoformat(actions[0]["at"]) >= before
    assert _kinds(db, execution_id)[-1] == "retry"
    # a fresh round of attempts after the re-drive
    assert _attempt(db, execution_id, "provider_unavailable") == "queued"
    while _attempt(db, execution_id, "provider_unavailable") != "dead_lettered":
        pass
    assert len(_row(db, execution_id).attempt_errors or []) == 6
    discard(db, execution_id, "<b>ops-bob</b>")
    row = _row(db, execution_id)
    assert (row.status, row.error_code) == ("failed", "dead_lettered")
    assert [a["action"] for a in row.operator_actions or []] == ["retry", "discard"]
    assert (row.operator_actions or [])[-1]["by"] == "<b>ops-bob</b>"  # stored as text
    assert _kinds(db, execution_id)[-1] == "finished"


def test_retry_or_discard_of_what_is_not_dead_lettered_changes_nothing(tiny: Database) -> None:
    db = tiny
    queued = new_execution(db)
    for act in (lambda: redrive(db, queued, "x", lambda _e: None),
                lambda: discard(db, queued, "x")):
        with pytest.raises(NotDeadLettered) as refused:
            act()
        assert refused.value.code.value == "not_dead_lettered"
    row = _row(db, queued)
    assert row.status == "queued" and row.operator_actions is None
    with pytest.raises(NotDeadLettered):
        redrive(db, "00000000-0000-0000-0000-000000000000", "x", lambda _e: None)


def test_the_backlog_gauges_read_each_waiting_state(tiny: Database) -> None:
    db = tiny
    assert oldest_waiting(db) == {"queued": 0.0, "waiting_to_retry": 0.0,
                                  "awaiting_approval": 0.0}
    queued, retrying = new_execution(db), new_execution(db)
    _attempt(db, retrying, "provider_unavailable")
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == queued)
                        .values(created_at=utcnow() - timedelta(seconds=400)))
    ages = oldest_waiting(db)
    assert 399 <= ages["queued"] <= 460
    assert 0 <= ages["waiting_to_retry"] < 60 and ages["awaiting_approval"] == 0.0
