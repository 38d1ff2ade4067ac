"""The slot of a pull request on SQLite and PostgreSQL: two deliveries never both start a run,
what arrives meanwhile is coalesced into one pending item, released slots start it after the
debounce window."""

from __future__ import annotations

import threading
import uuid
from datetime import timedelta
from typing import Any

from services.db.base import utcnow
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.triggers import DEBOUNCING, IDLE, RUNNING, DeliveryStore, SlotStore
from services.settings import StudioSettings
from services.triggers.slots import (
    COALESCED,
    STARTED,
    register_kind,
    release,
    start_due,
    start_work,
)

CREATED: list[tuple[str, int, dict[str, Any]]] = []


def _create(_db: Database, _settings: StudioSettings, repository: str, number: int,
            work: dict[str, Any]) -> str:
    CREATED.append((repository, number, work))
    return str(uuid.uuid4())


register_kind("slot-test", _create)


def _work(text: str) -> dict[str, Any]:
    return {"kind": "slot-test", "comments": [{"text": text}]}


def test_of_many_racing_offers_one_starts_and_the_rest_wait_as_one_item(db: Database) -> None:
    repository = f"acme/{uuid.uuid4().hex[:8]}"
    SettingsRepository(db).set("trigger_debounce_s", 0)
    launched: list[str] = []
    answers: list[str] = []
    barrier = threading.Barrier(6)

    def offer(index: int) -> None:
        barrier.wait()
        offered = start_work(db, StudioSettings(), repository, 5, _work(f"c{index}"),
                             launched.append)
        answers.append(offered.outcome)

    threads = [threading.Thread(target=offer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(STARTED) == 1 and answers.count(COALESCED) == 5
    assert len(launched) == 1
    slot = SlotStore(db).read(repository, 5)
    assert slot.state == RUNNING and slot.execution_id == launched[0]
    first = [w for r, _, w in CREATED if r == repository][0]["comments"][0]["text"]
    pending = [c["text"] for c in (slot.pending or {})["comments"]]
    # the pending item carries every comment the first run did not see, and only those
    assert sorted(pending + [first]) == sorted(f"c{i}" for i in range(6))

    # the run ends: debouncing with the pending item, which then starts once, at its due time
    assert release(db, repository, 5) is not None
    slot = SlotStore(db).read(repository, 5)
    assert slot.state == DEBOUNCING
    started = start_due(db, StudioSettings(), slot, launched.append)
    assert started is not None and launched == [launched[0], started]
    assert start_due(db, StudioSettings(), slot, launched.append) is None  # stale read: no-op
    release(db, repository, 5)
    assert SlotStore(db).read(repository, 5).state == IDLE


def test_pending_work_waits_for_its_debounce_window(db: Database) -> None:
    repository = f"acme/{uuid.uuid4().hex[:8]}"
    SettingsRepository(db).set("trigger_debounce_s", 3600)
    launched: list[str] = []
    start_work(db, StudioSettings(), repository, 9, _work("a"), launched.append)
    start_work(db, StudioSettings(), repository, 9, _work("b"), launched.append)
    release(db, repository, 9)
    slot = SlotStore(db).read(repository, 9)
    assert slot.state == DEBOUNCING and slot.due_at is not None
    assert slot.due_at > utcnow() + timedelta(seconds=3000)
    assert start_due(db, StudioSettings(), slot, launched.append) is None  # not yet
    assert len(launched) == 1
    # positive control: the same slot with its window passed starts
    SlotStore(db).transition(slot, due_at=utcnow() - timedelta(seconds=1))
    assert start_due(db, StudioSettings(), SlotStore(db).read(repository, 9),
                     launched.append) is not None
    assert len(launched) == 2


def test_a_delivery_id_is_recorded_once(db: Database) -> None:
    store = DeliveryStore(db)
    delivery_id = str(uuid.uuid4())
    assert store.record(delivery_id, event="issues", outcome="queued")  # positive control
    assert not store.record(delivery_id, event="issues", outcome="ignored")
    found = store.get(delivery_id)
    assert found is not None and found.outcome == "queued"


def test_a_delivery_is_claimed_for_processing_once(db: Database) -> None:
    store = DeliveryStore(db)
    delivery_id = str(uuid.uuid4())
    store.record(delivery_id, event="issues", outcome="queued")
    assert store.claim(delivery_id, ("queued", "deferred"), "processing")
    assert not store.claim(delivery_id, ("queued", "deferred"), "processing")
