"""Aggregates for metrics: executions by status, tool calls by outcome, the age of the oldest
execution in each waiting state (one query each)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import func, select

from services.db.base import utcnow
from services.db.models import NodeExecution, ToolCallRecord
from services.db.session import Database


def executions_by_status(db: Database) -> dict[str, int]:
    query = select(NodeExecution.status, func.count()).group_by(NodeExecution.status)
    with db.session() as session:
        return {str(status): int(count) for status, count in session.execute(query)}


def tool_calls_by_outcome(db: Database) -> dict[str, int]:
    """``ok``, the error code of a failed call, or ``pending`` for a call without a result yet."""
    query = (select(ToolCallRecord.ok, ToolCallRecord.error_code, func.count())
             .group_by(ToolCallRecord.ok, ToolCallRecord.error_code))
    counts: dict[str, int] = {}
    with db.session() as session:
        for ok, code, count in session.execute(query):
            outcome = "pending" if ok is None else ("ok" if ok else (code or "error"))
            counts[outcome] = counts.get(outcome, 0) + int(count)
    return counts


WAITING_STATES = ("queued", "waiting_to_retry", "awaiting_approval")


def oldest_waiting(db: Database) -> dict[str, float]:
    """Seconds the oldest execution of each waiting state has waited (0 when none): queued
    (not held by the kill switch, not waiting to retry) since it was created, waiting to retry
    and awaiting an approval since it last changed."""
    queued = NodeExecution.status == "queued"
    queries = {
        "queued": select(func.min(NodeExecution.created_at)).where(
            queued, NodeExecution.retry_at.is_(None), NodeExecution.paused_reason.is_(None)),
        "waiting_to_retry": select(func.min(NodeExecution.updated_at)).where(
            queued, NodeExecution.retry_at.is_not(None)),
        "awaiting_approval": select(func.min(NodeExecution.updated_at)).where(
            NodeExecution.status == "awaiting_approval"),
    }
    now = utcnow()
    ages: dict[str, float] = {}
    with db.session() as session:
        for state, query in queries.items():
            since = session.execute(query).scalar_one_or_none()
            ages[state] = max((now - as_utc(since)).total_seconds(), 0.0) if since else 0.0
    return ages


def as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value
