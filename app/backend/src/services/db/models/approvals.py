"""Approvals: a tool call that waits for a person's decision (``services.runs.approvals``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.flowcharts import new_id
from services.db.models.team_owned import TeamOwned


class ToolApproval(TeamOwned, Base):
    """One approval asked for one tool call of an execution, and its decision.

    ``status`` is ``pending``, ``approved`` or ``denied``; ``decided_by`` names who decided (an
    API token's name, ``cli:<user>``, or ``timeout``). ``fingerprint`` is the call's tool and
    arguments (:func:`services.execution.approvals.call_fingerprint`): a self-driving engine
    that asks the same call again in a new session gets the decision made for it;
    ``used_by_call`` is the call the decision was applied to.
    """

    __tablename__ = "tool_approvals"
    __table_args__ = (UniqueConstraint("execution_id", "call_id",
                                       name="uq_tool_approvals_execution_call"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), index=True)
    call_id: Mapped[str] = mapped_column(String(255))
    tool_name: Mapped[str] = mapped_column(String(128))
    domain: Mapped[str] = mapped_column(String(64))
    operation: Mapped[str] = mapped_column(String(128))
    args: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    fingerprint: Mapped[str] = mapped_column(String(64))
    rule: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    decided_by: Mapped[str | None] = mapped_column(String(255))
    reason: Mapped[str | None] = mapped_column(Text)
    used_by_call: Mapped[str | None] = mapped_column(String(255))
    requested_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime())
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
