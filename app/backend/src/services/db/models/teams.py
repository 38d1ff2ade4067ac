"""Teams: who owns executions, flowcharts, runs, approvals, MCP servers and tokens.

A row that belongs to a team carries ``team_id`` (:class:`TeamOwned` adds the column to a new
table in one line: triggers, eval runs). ``NULL`` on a token means deployment-wide (an operator);
on other rows it is only seen before migration 0014 moved them to the ``default`` team.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.flowcharts import new_id
from services.db.models.team_owned import DEFAULT_TEAM, TeamOwned

__all__ = ["DEFAULT_TEAM", "Team", "TeamBudgetAlert", "TeamOwned", "TeamRepository", "TeamSpend"]


class Team(Base):
    """A team: ``monthly_budget_usd`` (``NULL``: no team cap), ``notify_url`` (optional, where
    budget alerts are POSTed, signed)."""

    __tablename__ = "teams"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    monthly_budget_usd: Mapped[float | None] = mapped_column(Float)
    notify_url: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TeamRepository(Base):
    """A repository pattern (``owner/name``, ``*`` and ``?`` allowed: ``acme/*``) assigned to a
    team; the most specific matching pattern (longest, then fewest wildcards) decides."""

    __tablename__ = "team_repositories"

    pattern: Mapped[str] = mapped_column(String(512), primary_key=True)
    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)


class TeamSpend(Base):
    """A team's spend per UTC month (``YYYY-MM``) in micro-dollars, like the repository ledger:
    ``spent_micros`` admitted under the budget, ``overflow_micros`` charged once it was full."""

    __tablename__ = "team_spend"

    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"),
                                         primary_key=True)
    month: Mapped[str] = mapped_column(String(7), primary_key=True)
    spent_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    overflow_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class TeamBudgetAlert(Base):
    """One budget alert: a team crossed ``threshold`` percent in ``month``. The primary key makes
    it once per threshold and month, whichever process crossed it first; ``delivered_at`` /
    ``attempts`` / ``last_error`` are the notification URL's delivery."""

    __tablename__ = "team_budget_alerts"

    team_id: Mapped[str] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"),
                                         primary_key=True)
    month: Mapped[str] = mapped_column(String(7), primary_key=True)
    threshold: Mapped[int] = mapped_column(Integer, primary_key=True)
    spent_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    budget_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    last_error: Mapped[str | None] = mapped_column(String(200))
