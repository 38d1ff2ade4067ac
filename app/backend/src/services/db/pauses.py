"""Executions the kill switch holds back: ``queued`` with ``paused_reason = 'killswitch'``.

While the kill switch is engaged nothing new starts: a running execution stops before its next
model or tool call and goes back to ``queued`` (:meth:`PauseStore.pause`, fenced by its lease
epoch, which also gives the lease up), and a queued one a worker picks up stays queued
(:meth:`PauseStore.hold`). Both are marked ``paused_reason = 'killswitch'`` with ``paused_at``.
A paused attempt counts as yielded (``yielded_attempts``), not lost: the reaper's ``max_attempts``
does not count it.

Once the kill switch is released, :meth:`PauseStore.due` hands each paused execution out for
dispatch, stamping ``dispatched_at`` in the same statement, so the release command, the API and
every reaper may all call it: each execution is handed out once, then again only if it stayed
paused ``older_than_s`` after that (its message was lost). The claim of the next attempt clears
the mark (:meth:`PauseStore.clear`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import and_, or_, select, update
from sqlalchemy.orm import Session

from services.db.base import utcnow
from services.db.journal import StaleLease
from services.db.models import FlowchartRunNode, NodeExecution, RuntimeSetting
from services.db.session import Database
from services.db.status import ExecutionStatus

KILLSWITCH_KEY = "killswitch_engaged"
PAUSED_BY_KILLSWITCH = "killswitch"


def killswitch_engaged(db: Database) -> bool:
    """The kill switch as stored now (no cache)."""
    with db.read_session() as session:
        row = session.get(RuntimeSetting, KILLSWITCH_KEY)
    return row is not None and row.value is True


@dataclass(frozen=True)
class PausedExecution:
    """A paused execution to dispatch again: a flowchart node's (``run_id``/``node_key`` set)
    goes back through its node task, a standalone one through ``studio.execute_node``."""

    execution_id: str
    run_id: str | None = None
    node_key: str | None = None


class PauseStore:
    """The pause columns of ``node_executions``; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def pause(self, execution_id: str, epoch: int) -> None:
        """Back to ``queued``, marked paused, the lease given up; fenced by ``epoch``
        (:class:`StaleLease` when another attempt holds the execution now)."""
        now = utcnow()
        with self.db.session() as session:
            result = session.execute(
                update(NodeExecution)
                .where(NodeExecution.id == execution_id, NodeExecution.lease_epoch == epoch)
                .values(status=ExecutionStatus.QUEUED, paused_reason=PAUSED_BY_KILLSWITCH,
                        paused_at=now, lease_owner=None, lease_expires_at=None, updated_at=now,
                        yielded_attempts=NodeExecution.yielded_attempts + 1))
            if not result.rowcount:  # type: ignore[attr-defined]
                raise StaleLease(f"lease epoch {epoch} of execution {execution_id} is no longer "
                                 "current", details={"execution_id": execution_id,
                                                     "epoch": epoch})

    def hold(self, execution_id: str) -> bool:
        """Mark a queued execution nobody holds as paused (it stays queued); answers whether it
        was marked."""
        now = utcnow()
        with self.db.session() as session:
            result = session.execute(
                update(NodeExecution)
                .where(NodeExecution.id == execution_id,
                       NodeExecution.status == ExecutionStatus.QUEUED,
                       or_(NodeExecution.lease_expires_at.is_(None),
                           NodeExecution.lease_expires_at < now))
                .values(paused_reason=PAUSED_BY_KILLSWITCH, paused_at=now, updated_at=now))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def clear(self, execution_id: str, epoch: int) -> None:
        """Drop the mark (the attempt holding ``epoch`` runs it now)."""
        with self.db.session() as session:
            session.execute(
                update(NodeExecution)
                .where(NodeExecution.id == execution_id, NodeExecution.lease_epoch == epoch,
                       NodeExecution.paused_reason.is_not(None))
                .values(paused_reason=None, paused_at=None))

    def paused(self, *, limit: int = 500) -> list[str]:
        """The ids of the executions paused now, oldest pause first."""
        query = (select(NodeExecution.id)
                 .where(NodeExecution.status == ExecutionStatus.QUEUED,
                        NodeExecution.paused_reason == PAUSED_BY_KILLSWITCH)
                 .order_by(NodeExecution.paused_at).limit(limit))
        with self.db.read_session() as session:
            return list(session.scalars(query))

    def due(self, older_than_s: float, *, standalone_only: bool = False,
            limit: int = 100) -> list[PausedExecution]:
        """Paused executions to dispatch again now that the kill switch is released (none while
        it is engaged): never dispatched since their pause, or over ``older_than_s`` ago. Each
        is stamped dispatched in the same statement. ``standalone_only``: leave flowchart
        nodes' executions out."""
        now = utcnow()
        paused = and_(NodeExecution.status == ExecutionStatus.QUEUED,
                      NodeExecution.paused_reason == PAUSED_BY_KILLSWITCH)
        not_sent = or_(NodeExecution.dispatched_at.is_(None),
                       NodeExecution.paused_at.is_(None),
                       NodeExecution.dispatched_at < NodeExecution.paused_at,
                       NodeExecution.dispatched_at < now - timedelta(seconds=older_than_s))
        if standalone_only:
            paused = and_(paused, NodeExecution.flowchart_run_id.is_(None))
        chosen = (select(NodeExecution.id).where(paused, not_sent)
                  .order_by(NodeExecution.paused_at).limit(limit))
        with self.db.session() as session:
            if _engaged(session):
                return []
            ids = sorted(session.scalars(
                update(NodeExecution)
                .where(NodeExecution.id.in_(chosen.scalar_subquery()), paused, not_sent)
                .values(dispatched_at=now).returning(NodeExecution.id)))
            nodes = {row.execution_id: row for row in session.scalars(
                select(FlowchartRunNode).where(FlowchartRunNode.execution_id.in_(ids)))} \
                if ids else {}
        return [PausedExecution(i, nodes[i].run_id, nodes[i].node_key) if i in nodes
                else PausedExecution(i) for i in ids]


def _engaged(session: Session) -> bool:
    row = session.get(RuntimeSetting, KILLSWITCH_KEY)
    return row is not None and row.value is True
