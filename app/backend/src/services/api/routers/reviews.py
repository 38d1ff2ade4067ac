"""A review execution's review, for its run page: ``GET /api/executions/{id}/review``.

Answers the verdict, the summary (findings outside the diff moved into it), the findings by file,
the link to the posted GitHub review and to each comment (posted, updated or resolved), and the
permission denials of the run (calls refused with ``tool_not_allowed`` or ``permission_denied``:
what a prompt injection tried). ``available`` is false until the review validated (and for an
execution that is not a review).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.teams import visible_execution
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.pr_reviews import PullRequestReviews
from services.db.session import Database
from services.execution.errors import ErrorCode

router = APIRouter(prefix="/api/executions", tags=["executions"], responses=ERROR_RESPONSES)

DENIALS = (ErrorCode.TOOL_NOT_ALLOWED.value, ErrorCode.PERMISSION_DENIED.value)


class RunReview(BaseModel):
    execution_id: str
    available: bool
    repository: str | None = None
    pr_number: int | None = None
    head_sha: str | None = None
    verdict: str | None = None
    summary: str | None = None
    url: str | None = None
    findings_by_file: dict[str, list[dict[str, Any]]] = {}
    comments: list[dict[str, Any]] = []
    denials: list[dict[str, Any]] = []


@router.get("/{execution_id}/review", response_model=RunReview, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.READ)])
def run_review(execution_id: str = Depends(visible_execution),  # noqa: B008
               db: Database = Depends(get_db)) -> RunReview:  # noqa: B008
    """The review of a review execution, and the calls its policy refused."""
    executions = ExecutionRepository(db)
    if executions.get(execution_id) is None:
        raise UnknownExecution(execution_id)
    denials = [{"call_id": c.call_id, "tool_name": c.tool_name, "code": c.error_code}
               for c in executions.tool_calls(execution_id) if c.error_code in DENIALS]
    row = PullRequestReviews(db).get(execution_id)
    if row is None:
        return RunReview(execution_id=execution_id, available=False, denials=denials)
    by_file: dict[str, list[dict[str, Any]]] = {}
    for finding in row.review.get("findings", []):
        by_file.setdefault(str(finding.get("path")), []).append(finding)
    return RunReview(execution_id=execution_id, available=True, repository=row.repository,
                     pr_number=row.pr_number, head_sha=row.head_sha, verdict=row.verdict,
                     summary=str(row.review.get("summary", "")), url=row.posted_url,
                     findings_by_file=by_file, comments=list(row.comments), denials=denials)
