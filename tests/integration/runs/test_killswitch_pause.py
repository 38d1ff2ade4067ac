"""The kill switch's pause bookkeeping, in process, on SQLite and PostgreSQL.

* an execution picked up while the switch is engaged is not claimed: it stays queued, marked
  paused (``execute_execution`` answers ``paused``), its lease epoch untouched;
* a pause is fenced by the lease epoch and gives the lease up;
* paused executions are handed out for dispatch only once the switch is released, once each
  (then again only if still paused ``queued_timeout_s`` later); the reaper does it on its pass
  and its "never claimed" pass leaves paused executions alone;
* an attempt that the kill switch stopped is not a finished run (the resume runs the loop on).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository, execution_to_json
from services.db.journal import StaleLease
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.pauses import PauseStore
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.runs.durable import execute_execution
from services.runs.pauses import redispatch_paused
from services.runs.reaper import reap
from services.runs.results import recorded_run
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings


def _execution(db: Database) -> str:
    return ExecutionRepository(db, settings_redactor()).create(provider="replay", model="replay",
                                          prompt=f"pause me {uuid.uuid4().hex[:6]}",
                                          repo_url="http://127.0.0.1:9/acme/widgets.git")


@pytest.fixture
def engaged(db: Database) -> Iterator[SettingsRepository]:
    switch = SettingsRepository(db)
    switch.set("killswitch_engaged", True)
    yield switch
    switch.set("killswitch_engaged", False)  # the PostgreSQL database is shared


def test_an_execution_picked_up_while_engaged_stays_queued_and_paused(
        db: Database, engaged: SettingsRepository, tmp_path: Path) -> None:
    execution_id = _execution(db)
    outcome = execute_execution(execution_id, settings=studio_settings(tmp_path / "data"), db=db)
    assert (outcome.state, outcome.status) == ("paused", "queued")
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    assert (row.status, row.paused_reason, row.lease_epoch) == ("queued", "killswitch", 0)
    assert row.lease_owner is None and row.started_at is None and row.error_code is None
    assert ExecutionRepository(db).events(execution_id) == []
    shown = execution_to_json(row)
    assert shown["paused_reason"] == "killswitch" and shown["paused_at"] is not None
    # picked up again (a duplicate delivery): still nothing runs, still epoch 0
    assert execute_execution(execution_id, settings=studio_settings(tmp_path / "data"),
                             db=db).state == "paused"
    assert LeaseStore(db).current_epoch(execution_id) == 0


def test_a_pause_is_fenced_by_the_epoch_and_gives_the_lease_up(db: Database) -> None:
    execution_id = _execution(db)
    store = LeaseStore(db)
    epoch = store.claim(execution_id, "me", 60.0)
    assert epoch == 1
    with pytest.raises(StaleLease):
        PauseStore(db).pause(execution_id, epoch - 1)
    PauseStore(db).pause(execution_id, epoch)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and (row.status, row.paused_reason) == ("queued", "killswitch")
    assert row.lease_owner is None and row.lease_expires_at is None
    assert store.claim(execution_id, "next", 60.0) == 2  # anyone may claim it again
    PauseStore(db).clear(execution_id, 2)
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.paused_reason is None
    assert execution_to_json(row)["paused_reason"] is None


def test_paused_executions_are_handed_out_once_and_only_after_release(
        db: Database, engaged: SettingsRepository, tmp_path: Path) -> None:
    ids = [_execution(db) for _ in range(2)]
    pauses = PauseStore(db)
    for execution_id in ids:
        assert pauses.hold(execution_id)
    sent: list[str] = []
    assert redispatch_paused(db, sent.append, None) == [] and sent == []
    # while engaged, the "never claimed" pass of the reaper leaves them alone too
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id.in_(ids))
                        .values(dispatched_at=utcnow() - timedelta(hours=1)))
    assert not set(ids) & set(LeaseStore(db).unclaimed(0.0))

    engaged.set("killswitch_engaged", False)
    settings = studio_settings(tmp_path / "data")
    reaped = reap(db, settings, sent.append)
    assert set(ids) <= set(reaped) and set(ids) <= set(sent)
    again: list[str] = []
    assert not set(ids) & set(redispatch_paused(db, again.append, None))  # stamped: once
    # still paused long after (the message was lost): handed out again
    assert set(ids) <= {p.execution_id for p in pauses.due(0.0)}


def test_an_attempt_the_kill_switch_stopped_is_not_a_finished_run() -> None:
    paused = [("started", {"task": "t"}),
              ("finished", {"outcome": "killswitch_engaged", "result": {"status": "failed",
                                                                       "summary": "stopped"}}),
              ("started", {"task": "t", "resumed": True})]
    assert recorded_run("e", "replay", "replay", paused[:2]) is None
    assert recorded_run("e", "replay", "replay", paused) is None
    done = [*paused, ("finished", {"outcome": "finished",
                                   "result": {"status": "success", "summary": "ok"}})]
    found = recorded_run("e", "replay", "replay", done)
    assert found is not None and found.outcome.value == "finished"
