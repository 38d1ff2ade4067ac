"""``LeaseStore``: the lease columns of ``node_executions``, one conditional ``UPDATE`` each.

The lease protocol (owner, epoch, expiry, fencing, the heartbeat) is drawn in
:mod:`services.runs.leases`; this module is its SQL. Every method is one transaction. The
renewal, the release, the fenced update and the epoch read are keyed by owner and epoch, so a
transaction a lost connection cut is run again whole on a fresh connection
(:func:`~services.db.connection_loss.rerun`): a renewal that cannot be made because the lease
is lost answers ``False``, one that cannot be made because the database is gone raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from sqlalchemy import or_, select, update

from services.db.base import utcnow
from services.db.connection_loss import rerun
from services.db.executions import UnknownExecution
from services.db.journal import StaleLease
from services.db.models import NodeExecution
from services.db.session import Database
from services.db.status import (
    ACTIVE_STATUSES,
    FINAL_STATUSES,
    PARKED_STATUSES,
    ExecutionStatus,
)
from services.db.team_admission import team_refuses


class LeaseStore:
    """The lease operations on one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def claim(self, execution_id: str, owner: str, ttl_s: float) -> int | None:
        """Take the lease; the new epoch, or ``None`` when it is held, the execution is final
        or its team runs as many as its concurrency limit allows (it then waits, queued:
        :mod:`services.db.team_admission`). Raises :class:`UnknownExecution` for an unknown
        id."""
        now = utcnow()
        statement = (
            update(NodeExecution)
            .where(NodeExecution.id == execution_id,
                   NodeExecution.status.not_in(sorted(FINAL_STATUSES | PARKED_STATUSES)),
                   or_(NodeExecution.lease_owner.is_(None),
                       NodeExecution.lease_expires_at.is_(None),
                       NodeExecution.lease_expires_at < now))
            .values(lease_owner=owner, lease_epoch=NodeExecution.lease_epoch + 1,
                    lease_expires_at=now + timedelta(seconds=ttl_s), status=ExecutionStatus.CLAIMED,
                    retry_at=None, updated_at=now)
            .returning(NodeExecution.lease_epoch)
        )
        with self.db.session() as session:
            if team_refuses(session, execution_id):
                return None
            epoch = session.execute(statement).scalar_one_or_none()
            if epoch is None and session.get(NodeExecution, execution_id) is None:
                raise UnknownExecution(execution_id)
        return int(epoch) if epoch is not None else None

    def heartbeat(self, execution_id: str, owner: str, epoch: int, ttl_s: float) -> bool:
        """Extend the lease; ``False`` when it is no longer ours (lost). A lost connection is
        not a lost lease: the renewal is made again on a fresh connection."""
        def renew() -> bool:
            with self.db.session() as session:
                result = session.execute(
                    update(NodeExecution)
                    .where(NodeExecution.id == execution_id, NodeExecution.lease_owner == owner,
                           NodeExecution.lease_epoch == epoch)
                    .values(lease_expires_at=utcnow() + timedelta(seconds=ttl_s))
                )
                return bool(result.rowcount)  # type: ignore[attr-defined]

        return rerun("lease renewal", renew)

    def release(self, execution_id: str, owner: str, epoch: int,
                status: ExecutionStatus | None = None, *, yielded: bool = False) -> None:
        """Give the lease up (nothing happens when it is no longer ours); with ``status``, the
        execution takes it in the same statement (no one sees that status with the lease
        still held). ``yielded``: the attempt ends on purpose (it waits for an approval), so it
        counts in ``yielded_attempts``, not against ``max_attempts``."""
        values: dict[str, Any] = {"lease_owner": None, "lease_expires_at": None}
        if status is not None:
            values["status"] = status
        if yielded:
            values["yielded_attempts"] = NodeExecution.yielded_attempts + 1
        def give_up() -> None:
            with self.db.session() as session:
                session.execute(
                    update(NodeExecution)
                    .where(NodeExecution.id == execution_id, NodeExecution.lease_owner == owner,
                           NodeExecution.lease_epoch == epoch)
                    .values(**values)
                )

        rerun("lease release", give_up)

    def current_epoch(self, execution_id: str) -> int | None:
        epoch = self.db.read("lease epoch read", lambda connection: connection.execute(
            select(NodeExecution.lease_epoch).where(NodeExecution.id == execution_id)
        ).scalar_one_or_none())
        return int(epoch) if epoch is not None else None

    def guarded_update(self, execution_id: str, epoch: int, values: Mapping[str, Any]) -> None:
        """Update the execution row only while ``epoch`` is current, else :class:`StaleLease`
        (the same values set again when a lost connection cut it: keyed by the epoch)."""
        def fenced() -> int:
            with self.db.session() as session:
                result = session.execute(
                    update(NodeExecution)
                    .where(NodeExecution.id == execution_id, NodeExecution.lease_epoch == epoch)
                    .values(updated_at=utcnow(), **values)
                )
                return int(result.rowcount)  # type: ignore[attr-defined]

        if not rerun("fenced update", fenced):
            raise stale(execution_id, epoch)

    def expired(self, *, limit: int = 100) -> list[str]:
        """Executions in an active status whose lease expired (what the reaper re-dispatches)."""
        now = utcnow()
        query = (select(NodeExecution.id)
                 .where(NodeExecution.status.in_(sorted(ACTIVE_STATUSES)),
                        NodeExecution.lease_expires_at.is_not(None),
                        NodeExecution.lease_expires_at < now)
                 .order_by(NodeExecution.lease_expires_at).limit(limit))
        with self.db.session() as session:
            return list(session.scalars(query))

    def expired_to_resend(self, resend_after_s: float, *, limit: int = 100) -> list[str]:
        """The :meth:`expired` executions not sent since their lease expired, or last sent
        over ``resend_after_s`` ago; each is stamped dispatched in the same statement. So an
        expiry is answered at once, by one reaper, and while the execution waits for a free
        worker slot it is sent again once per ``resend_after_s``, not once per pass of every
        reaper (a queue flooded with redundant messages, found by the chaos soak)."""
        now = utcnow()
        # An active execution with no lease at all was released by a process that stopped
        # without finishing it (its database session cut mid-write, found by the chaos soak):
        # it counts as expired, or nothing would ever send it again.
        abandoned = NodeExecution.lease_expires_at.is_(None) & NodeExecution.lease_owner.is_(None)
        due = (select(NodeExecution.id)
               .where(NodeExecution.status.in_(sorted(ACTIVE_STATUSES)),
                      or_(abandoned, NodeExecution.lease_expires_at < now),
                      or_(NodeExecution.dispatched_at.is_(None),
                          NodeExecution.dispatched_at < NodeExecution.lease_expires_at,
                          NodeExecution.dispatched_at < now - timedelta(seconds=resend_after_s)))
               .order_by(NodeExecution.lease_expires_at).limit(limit))
        statement = (update(NodeExecution)
                     .where(NodeExecution.id.in_(due.scalar_subquery()),
                            or_(abandoned, NodeExecution.lease_expires_at < now))
                     .values(dispatched_at=now).returning(NodeExecution.id))
        with self.db.session() as session:
            return sorted(session.scalars(statement))

    def mark_dispatched(self, execution_id: str) -> None:
        """Record that a worker message is being sent for the execution (now)."""
        with self.db.session() as session:
            session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                            .values(dispatched_at=utcnow()))

    def unclaimed(self, older_than_s: float, *, limit: int = 100) -> list[str]:
        """Executions dispatched more than ``older_than_s`` ago and still queued, unclaimed since
        (their message was lost with the worker that took it; queued again after an approval
        counts too: no lease holder). Each is stamped dispatched again
        in the same statement, so the next pass (or another reaper) leaves it alone until the
        bound has passed once more."""
        now = utcnow()
        due = (select(NodeExecution.id)
               .where(NodeExecution.status == ExecutionStatus.QUEUED,
                      NodeExecution.lease_owner.is_(None),
                      NodeExecution.paused_reason.is_(None),  # held: see db.pauses
                      # a flowchart node's goes through its node (db.approvals, db.pauses)
                      NodeExecution.flowchart_run_id.is_(None),
                      NodeExecution.dispatched_at.is_not(None),
                      NodeExecution.dispatched_at < now - timedelta(seconds=older_than_s))
               .order_by(NodeExecution.dispatched_at).limit(limit))
        statement = (update(NodeExecution)
                     .where(NodeExecution.id.in_(due.scalar_subquery()),
                            NodeExecution.status == ExecutionStatus.QUEUED,
                            NodeExecution.lease_owner.is_(None))
                     .values(dispatched_at=now).returning(NodeExecution.id))
        with self.db.session() as session:
            return sorted(session.scalars(statement))

    def live(self) -> list[str]:
        """Executions that are not final (their workspaces are not orphans)."""
        query = select(NodeExecution.id).where(
            NodeExecution.status.not_in(sorted(FINAL_STATUSES)))
        with self.db.session() as session:
            return list(session.scalars(query))


def stale(execution_id: str, epoch: int) -> StaleLease:
    return StaleLease(f"lease epoch {epoch} of execution {execution_id} is no longer current",
                      details={"execution_id": execution_id, "epoch": epoch})
