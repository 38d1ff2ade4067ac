"""``DbRunControl``: the kill switch and cancellation, read fresh from the database each check."""

from __future__ import annotations

from sqlalchemy import select

from services.db.models import NodeExecution, RuntimeSetting
from services.db.session import Database
from services.execution.errors import ErrorCode


class DbRunControl:
    """A :class:`~services.execution.ports.RunControl` for one execution."""

    def __init__(self, db: Database, execution_id: str) -> None:
        self._db = db
        self._execution_id = execution_id

    def check(self) -> ErrorCode | None:
        """``killswitch_engaged`` if the kill switch is on, ``cancelled`` if cancel was asked."""
        with self._db.read_session() as session:
            killswitch = session.get(RuntimeSetting, "killswitch_engaged")
            cancel = session.execute(
                select(NodeExecution.cancel_requested)
                .where(NodeExecution.id == self._execution_id)
            ).scalar_one_or_none()
        if killswitch is not None and killswitch.value is True:
            return ErrorCode.KILLSWITCH_ENGAGED
        if cancel:
            return ErrorCode.CANCELLED
        return None
