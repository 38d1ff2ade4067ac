"""One active execution per pull request (and per issue): the slot and its transitions.

States of the slot of ``(repository, number)``::

    idle --offer--> running --execution final--> idle            (nothing pending)
                      |  ^                   \\-> debouncing      (work pending)
              offer: pending += work,             | due_at passed
              due_at = now + trigger_debounce_s   v
                      \\------------------------ running (the pending work, at the latest head)

Each arrow is one conditional UPDATE (:meth:`services.db.triggers.SlotStore.transition`): of
two processes that read the same slot, one moves it and the other reads it again, so two
deliveries never both start a run. Work offered while the slot is ``running`` or ``debouncing``
is merged into the one pending item (comments joined, in order), which starts once the run is
final and the debounce window has passed: a storm of comments (or of pushes to a pull request
with review on) yields at most two runs. A pending ``review`` gives way to any other kind
offered after it (a follow-up's push is reviewed in turn when review is on), and a review
offered while other work is pending joins it without changing its kind.

:func:`start_work` is the entry point for any kind of work on a pull request or issue. A kind is
registered once with :func:`register_kind` (how to record its execution from the work item);
``issue`` and ``follow_up`` are registered by :mod:`services.triggers.starting`.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from services.db.base import utcnow
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.db.triggers import DEBOUNCING, IDLE, RUNNING, Slot, SlotStore
from services.settings import StudioSettings
from services.telemetry import tracing

log = logging.getLogger(__name__)

Work = dict[str, Any]
Create = Callable[[Database, StudioSettings, str, int, Work], str]
"""Record the execution of a work item on ``(repository, number)``; answers its id."""
Launch = Callable[[str], object]
"""Hand a recorded execution to whoever runs it (the worker's dispatcher)."""
STARTED, COALESCED = "started", "coalesced"
MAX_ROUNDS = 50  # rereads after losing a race (each loss means another process moved it)
MAX_COMMENTS = 50

_KINDS: dict[str, Create] = {}


def register_kind(kind: str, create: Create) -> None:
    """How executions of work items of ``kind`` are recorded (once per process)."""
    _KINDS[kind] = create


@dataclass(frozen=True)
class Offered:
    """What :func:`start_work` did: ``started`` (``execution_id``: the new run) or
    ``coalesced`` (waits in the slot; ``execution_id``: the run under way, if any)."""

    outcome: str
    execution_id: str | None


def debounce_s(db: Database) -> float:
    return float(SettingsRepository(db).get("trigger_debounce_s"))


YIELDING_KINDS = ("review",)  # a pending item of these kinds gives way to another kind


def merge(pending: Work | None, work: Work) -> Work:
    """One pending item out of two: the first's kind and fields (unless it is a review and the
    second is not: then the second's), every comment and delivery of both."""
    if pending is None:
        return dict(work)
    lead = work if (pending.get("kind") in YIELDING_KINDS
                    and work.get("kind") not in YIELDING_KINDS) else pending
    merged = dict(lead)
    comments = list(pending.get("comments") or []) + list(work.get("comments") or [])
    merged["comments"] = comments[:MAX_COMMENTS]
    merged["deliveries"] = list(pending.get("deliveries") or []) + list(
        work.get("deliveries") or [])
    return merged


def start_work(db: Database, settings: StudioSettings, repository: str, number: int,
               work: Work, launch: Launch) -> Offered:
    """Start ``work`` (a dict with ``kind``, a registered kind) on ``(repository, number)``
    now if the slot is idle, else add it to the slot's pending item (started after the run
    under way, once ``trigger_debounce_s`` has passed with nothing new)."""
    if not _KINDS:  # the built-in kinds register themselves on import
        importlib.import_module("services.triggers.starting")
    if work.get("kind") not in _KINDS:
        raise ValueError(f"unknown kind of work {work.get('kind')!r}")
    store = SlotStore(db)
    for _ in range(MAX_ROUNDS):
        slot = store.read(repository, number)
        if slot.state == IDLE:
            if store.transition(slot, state=RUNNING, execution_id=None, pending=None,
                                due_at=None, running_work=work):
                return Offered(STARTED, _begin(db, settings, slot, work, launch))
            continue
        due = utcnow() + timedelta(seconds=debounce_s(db))
        if store.transition(slot, pending=merge(slot.pending, work), due_at=due):
            log.info("%s#%d: work coalesced into the pending follow-up (%s)", repository,
                     number, slot.state)
            return Offered(COALESCED, slot.execution_id)
    raise RuntimeError(f"{repository}#{number}: the slot kept moving; try again")


def _begin(db: Database, settings: StudioSettings, slot: Slot, work: Work,
           launch: Launch) -> str:
    """Record and launch the execution of a slot this process just moved to ``running``; if
    recording fails the slot is released (idle, or debouncing with what is pending)."""
    store = SlotStore(db)
    with tracing.span("studio.trigger.start", {"studio.repository": slot.repository,
                                               "studio.number": slot.number,
                                               "studio.work_kind": str(work.get("kind"))}):
        try:
            execution_id = _KINDS[str(work["kind"])](db, settings, slot.repository, slot.number,
                                                     work)
        except BaseException:
            release(db, slot.repository, slot.number)
            raise
        store.attach(slot.repository, slot.number, execution_id)
        tracing.annotate({"studio.execution_id": execution_id})
    launch(execution_id)
    return execution_id


def release(db: Database, repository: str, number: int, *,
            requeue: Work | None = None) -> Slot | None:
    """The run of a ``running`` slot is over: ``debouncing`` when work is pending (or
    ``requeue`` is given: queued once more), else ``idle``. Answers the slot as it was when
    this process moved it, or ``None`` when it was not running."""
    store = SlotStore(db)
    for _ in range(MAX_ROUNDS):
        slot = store.read(repository, number)
        if slot.state != RUNNING:
            return None
        pending = merge(requeue, slot.pending or {}) if requeue is not None else slot.pending
        if pending:
            moved = store.transition(slot, state=DEBOUNCING, pending=pending,
                                     due_at=slot.due_at or utcnow(), running_work=None)
        else:
            moved = store.transition(slot, state=IDLE, pending=None, due_at=None,
                                     execution_id=None, running_work=None)
        if moved:
            return slot
    return None


def start_due(db: Database, settings: StudioSettings, slot: Slot, launch: Launch) -> str | None:
    """Start the pending item of a ``debouncing`` slot whose window has passed."""
    if slot.state != DEBOUNCING or slot.pending is None:
        return None
    if slot.due_at is not None and slot.due_at > utcnow():
        return None
    work = slot.pending
    if not SlotStore(db).transition(slot, state=RUNNING, execution_id=None, pending=None,
                                    due_at=None, running_work=work):
        return None
    return _begin(db, settings, slot, work, launch)
