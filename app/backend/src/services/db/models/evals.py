"""Evaluation runs (``studio eval``): one row per run, one per task attempt of its matrix."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.flowcharts import new_id
from services.db.models.team_owned import TeamOwned


class EvalRun(TeamOwned, Base):
    """A suite run over a matrix of providers, models and roles (``config``: the matrix, the
    concurrency, the suite's fingerprint), ``running`` until every item is graded; it belongs to
    the team of whoever started it (``studio eval run --team``), as do its executions."""

    __tablename__ = "eval_runs"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    suite: Mapped[str] = mapped_column(String(200))
    source: Mapped[str] = mapped_column(Text)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    status: Mapped[str] = mapped_column(String(32), default="running")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, index=True)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class EvalItem(Base):
    """One task in one matrix cell (provider, model, role) and repeat; its execution and, once
    graded, the result: ``resolved``, the tests that passed and failed, cost, tokens, turns."""

    __tablename__ = "eval_items"
    __table_args__ = (UniqueConstraint("eval_run_id", "task_id", "cell", "repeat"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    eval_run_id: Mapped[str] = mapped_column(
        ForeignKey("eval_runs.id", ondelete="CASCADE"), index=True)
    task_id: Mapped[str] = mapped_column(String(200))
    cell: Mapped[str] = mapped_column(String(300))  # "provider/model/role"
    repeat: Mapped[int] = mapped_column(Integer, default=0)
    execution_id: Mapped[str | None] = mapped_column(
        ForeignKey("node_executions.id", ondelete="SET NULL"), index=True)
    status: Mapped[str] = mapped_column(String(32), default="pending")  # pending|running|graded
    resolved: Mapped[bool | None] = mapped_column(Boolean)
    tests_passed: Mapped[list[str]] = mapped_column(JSON, default=list)
    tests_failed: Mapped[list[str]] = mapped_column(JSON, default=list)
    cost_usd: Mapped[float] = mapped_column(Float, default=0.0)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    turns: Mapped[int] = mapped_column(Integer, default=0)
    duration_s: Mapped[float] = mapped_column(Float, default=0.0)
    error_code: Mapped[str | None] = mapped_column(String(64))
    detail: Mapped[str | None] = mapped_column(Text)
    graded_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
