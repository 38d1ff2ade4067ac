"""``ExecutionStatus``: every status is waiting, active, parked (dead-lettered) or final, exactly
one of them."""

from __future__ import annotations

from services.db.status import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    PARKED_STATUSES,
    ExecutionStatus,
)


def test_every_status_is_waiting_active_parked_or_final() -> None:
    waiting = {ExecutionStatus.QUEUED, ExecutionStatus.AWAITING_APPROVAL}
    assert not ACTIVE_STATUSES & FINAL_STATUSES
    assert not PARKED_STATUSES & (waiting | ACTIVE_STATUSES | FINAL_STATUSES)
    assert not waiting & (ACTIVE_STATUSES | FINAL_STATUSES)
    assert waiting | ACTIVE_STATUSES | FINAL_STATUSES | PARKED_STATUSES == set(ExecutionStatus)


def test_statuses_are_their_column_values() -> None:
    assert [s.value for s in ExecutionStatus] == [
        "queued", "claimed", "running", "finalizing", "succeeded", "failed", "cancelled", "stalled",
        "awaiting_approval", "dead_lettered"]
    assert ExecutionStatus("finalizing") == "finalizing"
