"""Work that starts on GitHub: webhook deliveries, trigger rules per repository, one slot per
pull request or issue (see :mod:`services.triggers`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, Integer, String, Text, false
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.team_owned import TeamOwned


class GithubDelivery(Base):
    """One webhook delivery as received (never its raw body): what it was and what came of it.

    ``work`` holds the few fields the worker needs to act on it (the issue or pull-request
    number, the comment, its file and line): untrusted text, shown escaped."""

    __tablename__ = "github_deliveries"

    id: Mapped[str] = mapped_column(String(100), primary_key=True)  # X-GitHub-Delivery
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64))
    repository: Mapped[str | None] = mapped_column(String(200), index=True)
    sender: Mapped[str | None] = mapped_column(String(100))
    number: Mapped[int | None] = mapped_column(Integer)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    outcome: Mapped[str] = mapped_column(String(32), index=True)
    detail: Mapped[str | None] = mapped_column(Text)
    work: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    execution_id: Mapped[str | None] = mapped_column(String(36))
    traceparent: Mapped[str | None] = mapped_column(String(100))


class GithubTrigger(TeamOwned, Base):
    """What starts work on one repository (``owner/name``) and with which settings: comment
    text never chooses the provider, the model, the limits or the network. It belongs to its
    repository's team (as stored), as do the executions it starts."""

    __tablename__ = "github_triggers"

    repository: Mapped[str] = mapped_column(String(200), primary_key=True)
    repo_url: Mapped[str] = mapped_column(Text)
    label: Mapped[str | None] = mapped_column(String(100))
    assignee: Mapped[str | None] = mapped_column(String(100))
    command: Mapped[str] = mapped_column(String(50))
    provider: Mapped[str] = mapped_column(String(32))
    model: Mapped[str | None] = mapped_column(String(200))
    limits: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    replay_script: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # the replay provider's
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # a pull request opened, pushed to or reopened starts a review execution (migration 0020)
    review: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class TriggerSlot(Base):
    """The one active execution of a pull request or issue: ``idle``, ``debouncing`` (pending
    work waits for ``due_at``) or ``running`` (``execution_id``). Every change of ``state`` is
    one conditional UPDATE on ``version``."""

    __tablename__ = "trigger_slots"

    repository: Mapped[str] = mapped_column(String(200), primary_key=True)
    number: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(16), default="idle", index=True)
    version: Mapped[int] = mapped_column(Integer, default=0)
    execution_id: Mapped[str | None] = mapped_column(String(36))
    # the work waiting for the slot: {"kind": ..., "comments": [...], "deliveries": [...], ...}
    pending: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    running_work: Mapped[dict[str, Any] | None] = mapped_column(JSON)  # what the run was given
    due_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)
