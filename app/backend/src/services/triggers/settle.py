"""The triggers' reaper pass (run by every worker's reaper, and by the API without a broker).

1. A ``running`` slot whose execution is final gets its end comment (once: by marker; a review
   that succeeded gets none: its review is the feedback), then is
   released: ``debouncing`` when work is pending, else ``idle``. A follow-up that failed with
   ``branch_moved`` is queued once more (at the new head). A slot whose execution was never
   recorded (its process died between the two) is released after :data:`ORPHAN_S`.
2. A ``debouncing`` slot whose window has passed starts its pending work.
3. Deliveries recorded ``deferred`` (the kill switch) are acted on once it is released, and
   deliveries still ``queued`` after :data:`UNSENT_S` (the broker could not be reached).

While the kill switch is engaged, nothing starts (2 and 3 wait). A dead worker never wedges a
pull request: its execution's lease expires, the durable path's reaper resumes it (or gives
up: final), and this pass then releases the slot.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.pauses import killswitch_engaged
from services.db.redaction import Redactor
from services.db.session import Database
from services.db.status import FINAL_STATUSES
from services.db.triggers import DEBOUNCING, RUNNING, DeliveryStore, Slot, SlotStore
from services.execution.errors import ErrorCode, StudioError
from services.settings import StudioSettings
from services.triggers import feedback
from services.triggers.events import FOLLOW_UP, QUEUED
from services.triggers.github import client
from services.triggers.ingress import DEFERRED
from services.triggers.processing import process_delivery
from services.triggers.slots import Launch, release, start_due

log = logging.getLogger(__name__)
ORPHAN_S = 120.0
UNSENT_S = 60.0  # a delivery still queued after this was never sent (the broker was away)


def settle(db: Database, settings: StudioSettings, launch: Launch) -> list[str]:
    """One pass; answers the executions it started."""
    started: list[str] = []
    for slot in SlotStore(db).in_states(RUNNING):
        _settle_running(db, settings, slot)
    if killswitch_engaged(db):
        return started
    for slot in SlotStore(db).in_states(DEBOUNCING):
        try:
            execution_id = start_due(db, settings, slot, launch)
        except StudioError as error:
            log.warning("%s#%d: pending work not started (%s)", slot.repository, slot.number,
                        error.code)
            continue
        if execution_id is not None:
            started.append(execution_id)
    stale = utcnow() - timedelta(seconds=UNSENT_S)
    for delivery in DeliveryStore(db).with_outcome(DEFERRED) + [
            d for d in DeliveryStore(db).with_outcome(QUEUED) if d.received_at < stale]:
        process_delivery(db, settings, delivery.id, launch)
    return started


def _settle_running(db: Database, settings: StudioSettings, slot: Slot) -> None:
    if slot.execution_id is None:
        if utcnow() - slot.updated_at > timedelta(seconds=ORPHAN_S):
            release(db, slot.repository, slot.number)
        return
    row = ExecutionRepository(db).get(slot.execution_id)
    if row is not None and row.status not in FINAL_STATUSES:
        return
    work = slot.running_work or {}
    if (row is not None and feedback.end_comment_wanted(work.get("kind"), row.status)
            and not _end_comment(db, settings, slot, row)):
        return  # GitHub unavailable for now: the next pass posts it, then releases
    requeue = None
    if (row is not None and row.error_code == ErrorCode.BRANCH_MOVED.value
            and work.get("kind") == FOLLOW_UP and not work.get("requeued")):
        requeue = {**work, "requeued": True}
        log.info("%s#%d: the branch moved; the follow-up is queued once more",
                 slot.repository, slot.number)
    release(db, slot.repository, slot.number, requeue=requeue)


def _end_comment(db: Database, settings: StudioSettings, slot: Slot,
                 row: NodeExecution) -> bool:
    """Post (or update) the end comment; ``False`` when GitHub should be asked again."""
    try:
        issues = client(db, settings, slot.repository)
    except StudioError as error:
        log.warning("%s#%d: no end comment (%s)", slot.repository, slot.number, error.code)
        return True
    try:
        feedback.ended(issues, settings, slot.number, row, Redactor.from_settings(settings))
    except StudioError as error:
        log.warning("%s#%d: end comment not posted (%s)", slot.repository, slot.number,
                    error.code)
        return not error.retryable
    finally:
        issues.close()
    return True
