"""Fair share: a team runs at most ``team_concurrency_limit`` executions at once.

An execution is admitted when it is claimed (:meth:`~services.db.leases.LeaseStore.claim` asks
:func:`team_refuses` in the claim's transaction; the worker asks it too before it starts a ``studio
execute`` for a delivery, so a refused delivery costs one query, not a process). It is refused
while its team has ``limit`` executions holding a live lease (claimed, running, finalizing) or
while an older standalone execution of its team is queued: executions start in order within their
team (a flowchart node's execution goes through its run and is not held). A refused execution stays
``queued`` with ``paused_reason = 'team_concurrency'`` (the API's ``waiting_reason``); its worker
slot is free at once, so the deliveries behind it (another team's) are taken next.

When a slot of the team frees, :func:`due` picks the team's oldest waiting executions that fit
(called by the worker after each execution and by the reaper's pass) and stamps them dispatched, so
they are sent again exactly once per free slot.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from services.db.base import utcnow
from services.db.models import NodeExecution, RuntimeSetting
from services.db.session import Database
from services.db.status import ACTIVE_STATUSES, TEAM_CONCURRENCY, ExecutionStatus

SETTING = "team_concurrency_limit"


def _limit(session: Session) -> int:
    stored = session.scalar(select(RuntimeSetting.value).where(RuntimeSetting.key == SETTING))
    try:
        return max(0, int(stored)) if stored is not None else 0
    except (TypeError, ValueError):
        return 0


def _running(session: Session, team_id: str) -> int:
    now = utcnow()
    return int(session.scalar(
        select(func.count()).select_from(NodeExecution)
        .where(NodeExecution.team_id == team_id,
               NodeExecution.status.in_(sorted(ACTIVE_STATUSES)),
               NodeExecution.lease_expires_at.is_not(None),
               NodeExecution.lease_expires_at > now)) or 0)


def _in_line(team_id: str) -> Any:
    """The team's standalone executions queued to start (not held by the kill switch)."""
    return ((NodeExecution.team_id == team_id)
            & (NodeExecution.status == ExecutionStatus.QUEUED)
            & NodeExecution.flowchart_run_id.is_(None)
            & NodeExecution.lease_owner.is_(None)
            & or_(NodeExecution.paused_reason.is_(None),
                  NodeExecution.paused_reason == TEAM_CONCURRENCY))


def team_refuses(session: Session, execution_id: str) -> bool:
    """In the caller's transaction: whether the execution's team is at its limit (or an older
    execution of the team waits); a refused execution is marked waiting. A transaction-level
    advisory lock per team on PostgreSQL decides concurrent claims of one team one at a time
    (SQLite's writer lock does the same)."""
    limit = _limit(session)
    if limit <= 0:
        return False
    row = session.execute(select(NodeExecution.team_id, NodeExecution.created_at,
                                 NodeExecution.status, NodeExecution.paused_reason,
                                 NodeExecution.flowchart_run_id)
                          .where(NodeExecution.id == execution_id)).first()
    if row is None or row.team_id is None or row.status != ExecutionStatus.QUEUED \
            or row.flowchart_run_id is not None:
        return False  # a resumed attempt keeps its place; a node's goes through its run
    if session.get_bind().dialect.name == "postgresql":  # one claim of a team at a time
        session.execute(select(func.pg_advisory_xact_lock(func.hashtext(row.team_id))))
    older = session.scalar(
        select(func.count()).select_from(NodeExecution)
        .where(_in_line(row.team_id), NodeExecution.id != execution_id,
               NodeExecution.created_at < row.created_at))
    if _running(session, row.team_id) < limit and not older:
        return False
    if row.paused_reason is None:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                        .values(paused_reason=TEAM_CONCURRENCY, paused_at=utcnow()))
    return True


def hold_if_over(db: Database, execution_id: str) -> bool:
    """:func:`team_refuses` in a transaction of its own (the worker's check before a start)."""
    with db.session() as session:
        return team_refuses(session, execution_id)


def due(db: Database) -> list[str]:
    """For each team with an execution waiting, its oldest queued executions that now fit
    under its limit (all of them once there is no limit), stamped dispatched (the caller sends
    each; one whose own message is still on its way is then delivered twice, which admission
    and the lease make harmless)."""
    with db.session() as session:
        limit = _limit(session)
        teams = set(session.scalars(
            select(NodeExecution.team_id).distinct()
            .where(NodeExecution.status == ExecutionStatus.QUEUED,
                   NodeExecution.paused_reason == TEAM_CONCURRENCY)))
        chosen: list[str] = []
        for team_id in sorted(t for t in teams if t is not None):
            free = max(0, limit - _running(session, team_id)) if limit > 0 else None
            query = (select(NodeExecution.id).where(_in_line(team_id))
                     .order_by(NodeExecution.created_at, NodeExecution.id).limit(free))
            chosen.extend(str(i) for i in session.scalars(query))
        if chosen:
            session.execute(update(NodeExecution).where(NodeExecution.id.in_(chosen))
                            .values(dispatched_at=utcnow()))
        return chosen
