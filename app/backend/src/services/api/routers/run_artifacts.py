"""What a run produced, for its page: the diff (base commit to head) and the replay script.

``GET /api/executions/{id}/diff`` answers the last workspace checkpoint's patch (``git diff
--binary <base_commit>`` of the whole worktree, taken after the last tool call: what was
committed and pushed), or ``available: false`` when there is none or it was over the size cap.
``GET /api/executions/{id}/replay-script`` answers the run's trajectory as a replay script
(:mod:`services.runs.replay_export`), as a download.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Depends
from fastapi.responses import Response
from pydantic import BaseModel

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.routers.executions import ExecutionId
from services.db.checkpoints import CheckpointRepository
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.session import Database
from services.runs.replay_export import replay_script

router = APIRouter(prefix="/api/executions", tags=["executions"], responses=ERROR_RESPONSES)


class RunDiff(BaseModel):
    execution_id: str
    available: bool
    base_commit: str | None
    head_sha: str | None
    patch: str | None


def _row_or_404(db: Database, execution_id: str) -> None:
    if ExecutionRepository(db).get(execution_id) is None:
        raise UnknownExecution(execution_id)


@router.get("/{execution_id}/diff", response_model=RunDiff, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.READ)])
def run_diff(execution_id: ExecutionId, db: Database = Depends(get_db)) -> RunDiff:  # noqa: B008
    """The run's changes against its base commit (the last checkpoint's patch)."""
    row = ExecutionRepository(db).get(execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    latest = CheckpointRepository(db).latest(execution_id)
    patch = latest.patch if latest is not None and latest.available else None
    return RunDiff(execution_id=execution_id, available=patch is not None,
                   base_commit=row.base_commit, head_sha=row.head_sha,
                   patch=patch.decode("utf-8", errors="replace") if patch is not None else None)


@router.get("/{execution_id}/replay-script", responses={
    **NOT_FOUND_RESPONSE, 200: {"content": {"application/json": {"schema": {"type": "object"}}},
                                "description": "The replay script (a download)."}},
            dependencies=[requires(Scope.READ)])
def run_replay_script(execution_id: ExecutionId,
                      db: Database = Depends(get_db)) -> Response:  # noqa: B008
    """The run's trajectory as a script for ``studio run --provider replay --script``."""
    _row_or_404(db, execution_id)
    events = [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]
    body = json.dumps(replay_script(events), indent=2, ensure_ascii=False)
    return Response(body, media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="replay-{execution_id}.json"'})
