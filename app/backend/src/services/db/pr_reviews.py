"""The ``pull_request_reviews`` rows: a review execution's validated review, then what was posted.

:meth:`PullRequestReviews.record` writes the validated review once (a resumed execution keeps
the first one: the review it posts is the one it validated); :meth:`PullRequestReviews.posted`
adds GitHub's answer; :meth:`PullRequestReviews.last_posted` is where an incremental review of
the same pull request starts.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from services.db.base import utcnow
from services.db.models import PullRequestReview
from services.db.session import Database


class PullRequestReviews:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, execution_id: str) -> PullRequestReview | None:
        with self._db.session() as session:
            row = session.get(PullRequestReview, execution_id)
            if row is not None:
                session.expunge(row)
            return row

    def record(self, execution_id: str, *, repository: str, pr_number: int, head_sha: str,
               base_sha: str, review: dict[str, Any],
               inline: list[dict[str, Any]]) -> PullRequestReview:
        """The execution's review row, written now unless an earlier attempt wrote it."""
        existing = self.get(execution_id)
        if existing is not None:
            return existing
        with self._db.session() as session:
            session.add(PullRequestReview(
                execution_id=execution_id, repository=repository, pr_number=pr_number,
                head_sha=head_sha, base_sha=base_sha, verdict=str(review["verdict"]),
                review=review, inline=inline, comments=[]))
        found = self.get(execution_id)
        assert found is not None
        return found

    def posted(self, execution_id: str, review_id: int, url: str,
               comments: list[dict[str, Any]]) -> None:
        with self._db.session() as session:
            row = session.get(PullRequestReview, execution_id)
            if row is None:
                return
            row.posted_review_id, row.posted_url = review_id, url
            row.comments, row.posted_at = comments, utcnow()

    def last_posted(self, repository: str, pr_number: int) -> PullRequestReview | None:
        """The latest posted review of the pull request (any execution's)."""
        with self._db.session() as session:
            row = session.scalars(
                select(PullRequestReview)
                .where(PullRequestReview.repository == repository,
                       PullRequestReview.pr_number == pr_number,
                       PullRequestReview.posted_review_id.is_not(None))
                .order_by(PullRequestReview.posted_at.desc()).limit(1)).first()
            if row is not None:
                session.expunge(row)
            return row
