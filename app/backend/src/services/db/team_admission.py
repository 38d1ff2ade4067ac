"""Fair share: a team runs at most ``team_concurrency_limit`` executions at once.

An execution is admitted when it is claimed (:meth:`~services.db.leases.LeaseStore.claim` asks
:func:`team_refuses` in the claim's transaction; the worker asks it too before it starts a
``studio execute`` for a delivery, so a refused delivery costs one query, not a process). It is
refused while its team has ``limit`` executions holding a live lease (claimed, running,
finalizing) or while an older execution of its team is waiting: executions start in order
within their team. A refused execution stays ``queued`` with ``paused_reason =
'team_concurrency'`` (the API's ``waiting_reason``); its worker slot is free at once, so the
deliveries behind it (another team's) are taken next.

When a slot of the team frees, :func:`due` picks the team's oldest waiting executions that fit
(called by the worker after each execution and by the reaper's pass) and stamps them
dispatched, so they are sent again exactly once per free slot.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
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


def team_refuses(session: Session, execution_id: str) -> bool:
    """In the caller's transaction: whether the execution's team is at its limit (or an older
    execution of the team waits); a refused execution is marked waiting. A transaction-level
    advisory lock per team on PostgreSQL decides concurrent claims of one team one at a time
    (SQLite's writer lock does the same)."""
    limit = _limit(session)
    if limit <= 0:
        return False
    row = session.execute(select(NodeExecution.team_id, NodeExecution.created_at,
                                 NodeExecution.status, NodeExecution.paused_reason)
                          .where(NodeExecution.id == execution_id)).first()
    if row is None or row.team_id is None or row.status != ExecutionStatus.QUEUED:
        return False  # a resumed attempt keeps its place
    if session.get_bind().dialect.name == "postgresql":  # one claim of a team at a time
        session.execute(select(func.pg_advisory_xact_lock(func.hashtext(row.team_id))))
    older = session.scalar(
        select(func.count()).select_from(NodeExecution)
        .where(NodeExecution.team_id == row.team_id,
               NodeExecution.status == ExecutionStatus.QUEUED,
               NodeExecution.paused_reason == TEAM_CONCURRENCY,
               NodeExecution.id != execution_id,
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
    """The waiting executions that now fit under their team's limit, oldest first per team,
    stamped dispatched (the caller sends each)."""
    with db.session() as session:
        limit = _limit(session)
        query = (select(NodeExecution.team_id, NodeExecution.id)
                 .where(NodeExecution.status == ExecutionStatus.QUEUED,
                        NodeExecution.paused_reason == TEAM_CONCURRENCY)
                 .order_by(NodeExecution.created_at, NodeExecution.id))
        waiting: dict[Any, list[str]] = {}
        for team_id, execution_id in session.execute(query):
            waiting.setdefault(team_id, []).append(str(execution_id))
        chosen: list[str] = []
        for team_id, ids in waiting.items():
            free = len(ids) if limit <= 0 else max(0, limit - _running(session, team_id))
            chosen.extend(ids[:free])
        if chosen:
            session.execute(update(NodeExecution).where(NodeExecution.id.in_(chosen))
                            .values(dispatched_at=utcnow()))
        return chosen
