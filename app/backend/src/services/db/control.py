"""``DbRunControl``: the kill switch and cancellation, read fresh from the database each check."""

from __future__ import annotations

from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.errors import ErrorCode


class DbRunControl:
    """A :class:`~services.execution.ports.RunControl` for one execution.

    A check is one read of :class:`~services.db.step_reads.StepReads`: the loop's own, shared
    with its limits and budget, or, alone (the worker watching a Kubernetes Job), one of its own.
    The run control always reads afresh."""

    def __init__(self, db: Database, execution_id: str, *,
                 reads: StepReads | None = None) -> None:
        self._reads = reads or StepReads(db, execution_id, repository="")

    def check(self) -> ErrorCode | None:
        """``killswitch_engaged`` if the kill switch is on, ``cancelled`` if cancel was asked."""
        state = self._reads.read("control")
        if state.settings.get("killswitch_engaged") is True:
            return ErrorCode.KILLSWITCH_ENGAGED
        if state.cancel_requested:
            return ErrorCode.CANCELLED
        return None
