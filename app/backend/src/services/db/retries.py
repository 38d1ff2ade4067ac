"""The SQL of retries and the dead-letter queue (the decisions are
:mod:`services.runs.retries`'): an execution's failed attempts, the retries that are due, an
operator's ``retry`` or ``discard`` of a dead-lettered execution."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, update

from services.db.base import utcnow
from services.db.models import FlowchartRunNode, NodeExecution
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode, ExecutionError


class NotDeadLettered(ExecutionError):
    """``retry`` or ``discard`` of an execution that is not dead-lettered (or no longer)."""

    default_code = ErrorCode.NOT_DEAD_LETTERED


class RetryStore:
    """The retry columns of ``node_executions`` on one database."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def attempt_errors(self, execution_id: str) -> list[dict[str, Any]]:
        with self.db.read_session() as session:
            found = session.execute(select(NodeExecution.attempt_errors).where(
                NodeExecution.id == execution_id)).scalar_one_or_none()
        return list(found or [])

    def last_error(self, execution_id: str) -> dict[str, Any]:
        with self.db.read_session() as session:
            found = session.execute(select(NodeExecution.last_error).where(
                NodeExecution.id == execution_id)).scalar_one_or_none()
        return dict(found or {})

    def claim_due(self, *, nodes: bool, limit: int = 100
                  ) -> list[tuple[str, tuple[str, str] | None]]:
        """The executions queued for a retry whose ``retry_at`` has passed, not dispatched
        since, each stamped dispatched in the same statement; with the ``(run id, node key)``
        of a flowchart node's (``nodes`` false: those are left out)."""
        now = utcnow()
        due = (select(NodeExecution.id)
               .where(NodeExecution.status == ExecutionStatus.QUEUED,
                      NodeExecution.retry_at.is_not(None), NodeExecution.retry_at <= now,
                      NodeExecution.lease_owner.is_(None),
                      NodeExecution.paused_reason.is_(None),
                      NodeExecution.dispatched_at.is_(None))
               .order_by(NodeExecution.retry_at).limit(limit))
        if not nodes:
            due = due.where(NodeExecution.flowchart_run_id.is_(None))
        statement = (update(NodeExecution)
                     .where(NodeExecution.id.in_(due.scalar_subquery()),
                            NodeExecution.dispatched_at.is_(None))
                     .values(dispatched_at=now).returning(NodeExecution.id))
        with self.db.session() as session:
            found = sorted(session.scalars(statement))
            targets = {row.execution_id: (row.run_id, row.node_key) for row in session.scalars(
                select(FlowchartRunNode).where(FlowchartRunNode.execution_id.in_(found)))
            } if found else {}
        return [(execution_id, targets.get(execution_id)) for execution_id in found]

    def node_of(self, execution_id: str) -> tuple[str, str] | None:
        """``(run id, node key)`` of the flowchart node whose execution this is."""
        with self.db.read_session() as session:
            node = session.scalars(select(FlowchartRunNode).where(
                FlowchartRunNode.execution_id == execution_id)).first()
            return (node.run_id, node.node_key) if node is not None else None

    def operator_act(self, execution_id: str, action: str, actor: str,
                     values: dict[str, Any]) -> None:
        """Record ``actor``'s ``action`` (``retry`` or ``discard``) on a dead-lettered
        execution and write ``values``, in one transaction; :class:`NotDeadLettered`
        otherwise (nothing written). A ``retry`` marks the last failed attempt ``redriven``:
        a fresh round of attempts starts after it."""
        now = utcnow()
        with self.db.session() as session:
            row = session.get(NodeExecution, execution_id)
            if row is None or row.status != ExecutionStatus.DEAD_LETTERED:
                status = row.status if row is not None else None
                raise NotDeadLettered(
                    f"execution {execution_id} is not dead-lettered ({status})",
                    details={"execution_id": execution_id, "status": status})
            actions = [*(row.operator_actions or []),
                       {"action": action, "by": actor, "at": now.isoformat()}]
            errors = list(row.attempt_errors or [])
            if action == "retry" and errors:
                errors[-1] = {**errors[-1], "redriven": True}
            done = session.execute(
                update(NodeExecution)
                .where(NodeExecution.id == execution_id,
                       NodeExecution.status == ExecutionStatus.DEAD_LETTERED)
                .values(operator_actions=actions, attempt_errors=errors, updated_at=now,
                        **values))
            if not done.rowcount:  # type: ignore[attr-defined]  # someone acted first
                raise NotDeadLettered(f"execution {execution_id} is no longer dead-lettered",
                                      details={"execution_id": execution_id})
