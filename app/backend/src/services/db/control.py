"""``DbRunControl``: the kill switch and cancellation, read fresh from the database each check."""

from __future__ import annotations

from sqlalchemy import Table, bindparam, select

from services.db.models import NodeExecution, RuntimeSetting
from services.db.session import Database
from services.db.step_reads import StepReads
from services.execution.errors import ErrorCode

_SETTINGS: Table = RuntimeSetting.__table__  # type: ignore[assignment]
_EXECUTIONS: Table = NodeExecution.__table__  # type: ignore[assignment]
# one statement for both (Core, built once): a loop checks before every call
_CHECK = select(
    select(_SETTINGS.c.value).where(_SETTINGS.c.key == "killswitch_engaged")
    .scalar_subquery().label("killswitch"),
    select(_EXECUTIONS.c.cancel_requested).where(_EXECUTIONS.c.id == bindparam("p_id"))
    .scalar_subquery().label("cancel"),
)


class DbRunControl:
    """A :class:`~services.execution.ports.RunControl` for one execution.

    Given the loop's :class:`~services.db.step_reads.StepReads`, a check is that shared read
    (the limits and the budget checked right after it reuse it); alone, one statement."""

    def __init__(self, db: Database, execution_id: str, *,
                 reads: StepReads | None = None) -> None:
        self._db = db
        self._execution_id = execution_id
        self._reads = reads

    def check(self) -> ErrorCode | None:
        """``killswitch_engaged`` if the kill switch is on, ``cancelled`` if cancel was asked."""
        if self._reads is not None:
            state = self._reads.read("control")
            killswitch, cancel = state.settings.get("killswitch_engaged"), state.cancel_requested
        else:
            with self._db.read_connection() as connection:
                row = connection.execute(_CHECK, {"p_id": self._execution_id}).one()
            killswitch, cancel = row.killswitch, row.cancel
        if killswitch is True:
            return ErrorCode.KILLSWITCH_ENGAGED
        if cancel:
            return ErrorCode.CANCELLED
        return None
