"""Aggregates for metrics: executions by status, tool calls by outcome (one query each)."""

from __future__ import annotations

from sqlalchemy import func, select

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
