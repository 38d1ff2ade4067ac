"""The pull-request reviews that review executions produced and posted."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow


class PullRequestReview(Base):
    """One review execution's validated review and what was posted of it.

    Written once the review validated (``review``: the structured review, findings outside the
    diff already moved into the summary; ``inline``: the findings posted inline); the ``posted_*``
    columns and ``comments`` (each comment's action and link) once GitHub answered. The last
    posted row of a pull request is where an incremental review starts (``head_sha``)."""

    __tablename__ = "pull_request_reviews"

    execution_id: Mapped[str] = mapped_column(
        ForeignKey("node_executions.id", ondelete="CASCADE"), primary_key=True)
    repository: Mapped[str] = mapped_column(String(255), index=True)
    pr_number: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    base_sha: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(32))
    review: Mapped[dict[str, Any]] = mapped_column(JSON)
    inline: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    comments: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    posted_review_id: Mapped[int | None] = mapped_column(Integer)
    posted_url: Mapped[str | None] = mapped_column(String(1000))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
