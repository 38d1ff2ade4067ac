"""Eval runs (``studio eval``) for the studio's eval pages: read only.

``GET /api/evals`` lists the latest runs; ``GET /api/evals/{id}`` answers one run's matrix (per
cell: pass rate with its 95 % Wilson interval, cost per resolved task) and its items (resolved,
tests passed and failed, cost, tokens, turns, duration, error code), as
:mod:`services.evals.summary` sums them up. Runs are started with the CLI (``studio eval run``,
``--team``). A team's token sees its team's runs only (another team's is 404); a
deployment-wide one every run (``?team=`` filters).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.teams import list_team, visible_by_id
from services.db.evals import EvalRepository, UnknownEvalRun
from services.db.models import EvalRun
from services.db.session import Database
from services.evals.errors import EvalError
from services.evals.summary import summarize

router = APIRouter(prefix="/api/evals", tags=["evals"], responses=ERROR_RESPONSES)

visible_eval = visible_by_id(EvalRun, EvalRun.id, UnknownEvalRun, "eval_id",
                             r"^[A-Za-z0-9][A-Za-z0-9._-]{0,35}$", "An eval run's id.")


class EvalRunRow(BaseModel):
    id: str
    suite: str
    status: str
    created_at: datetime
    finished_at: datetime | None


class EvalRunList(BaseModel):
    runs: list[EvalRunRow]


class EvalCell(BaseModel):
    cell: str
    items: int
    graded: int
    resolved: int
    pass_rate: float
    ci_low: float
    ci_high: float
    cost_usd: float
    cost_per_task: float
    cost_per_resolved: float | None
    tokens: int
    turns: int


class EvalItemOut(BaseModel):
    task_id: str
    cell: str
    repeat: int
    execution_id: str | None
    status: str
    resolved: bool | None = None
    tests_passed: list[str] = []
    tests_failed: list[str] = []
    cost_usd: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    turns: int = 0
    duration_s: float = 0.0
    error_code: str | None = None
    detail: str | None = None


class EvalReport(BaseModel):
    id: str
    suite: str
    source: str
    status: str
    created_at: str
    finished_at: str | None
    matrix: dict[str, Any] | None
    cells: list[EvalCell]
    items: list[EvalItemOut]


@router.get("", response_model=EvalRunList, dependencies=[requires(Scope.READ)])
def list_evals(db: Database = Depends(get_db),  # noqa: B008
               team_id: str | None = Depends(list_team),  # noqa: B008
               limit: Annotated[int, Query(ge=1, le=200)] = 50) -> EvalRunList:
    """The latest eval runs of the caller's team, newest first."""
    return EvalRunList(runs=[EvalRunRow(id=r.id, suite=r.suite, status=r.status,
                                        created_at=r.created_at, finished_at=r.finished_at)
                             for r in EvalRepository(db).runs(limit, team_id)])


@router.get("/{eval_id}", response_model=EvalReport, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.READ)])
def get_eval(eval_id: str = Depends(visible_eval),  # noqa: B008
             db: Database = Depends(get_db)) -> EvalReport:  # noqa: B008
    """One eval run: its matrix with intervals, and every item."""
    try:
        summary = summarize(db, eval_id)
    except EvalError:
        raise UnknownEvalRun(eval_id) from None
    return EvalReport.model_validate(summary.as_json())
