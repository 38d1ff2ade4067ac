"""The pull-request ledger in the database: one pull request per execution, on its row.

:class:`DbPullRequestLedger` implements ``services.repos.pull_requests.PullRequestLedger`` over the
``pr_number``/``pr_url`` columns of ``node_executions``, so the keyed pull-request port shared by
the ``git.create_pull_request`` tool and the finalizer finds a pull request opened by an earlier
attempt (another process, before a crash) and never opens a second one.
"""

from __future__ import annotations

from sqlalchemy import update

from services.db.base import utcnow
from services.db.models import NodeExecution
from services.db.session import Database
from services.execution.ports import PullRequestRef


class DbPullRequestLedger:
    def __init__(self, db: Database) -> None:
        self._db = db

    def get(self, execution_id: str) -> PullRequestRef | None:
        with self._db.session() as session:
            row = session.get(NodeExecution, execution_id)
            if row is None or row.pr_number is None or not row.pr_url:
                return None
            return PullRequestRef(number=row.pr_number, url=row.pr_url,
                                  head_branch=row.branch or "", base_branch=row.base_branch or "",
                                  created=False)

    def put(self, execution_id: str, ref: PullRequestRef) -> None:
        with self._db.session() as session:
            session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                            .values(pr_number=ref.number, pr_url=ref.url, updated_at=utcnow()))
