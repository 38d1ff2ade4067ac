"""What a run produced, for its page: the diff (base commit to head) and the replay script.

``GET /api/executions/{id}/diff`` answers the last workspace checkpoint's patch (``git diff
--binary <base_commit>`` of the whole worktree, taken after the last tool call: what was
committed and pushed), or ``available: false`` when there is none or it was over the size cap.
``GET /api/executions/{id}/replay-script`` answers the run's trajectory as a replay script
(:mod:`services.runs.replay_export`), as a download.
``GET /api/executions/{id}/output?stream=stdout|stderr[&call_id=...]`` answers the whole recorded
output of one of its ``command.run`` calls (``call_id``) or, without it, of a command node's
execution, as UTF-8 text (a download): what the run page shows the end of.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import BaseModel

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.teams import visible_execution
from services.db.checkpoints import CheckpointRepository
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.session import Database
from services.execution.errors import ErrorCode
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
def run_diff(execution_id: str = Depends(visible_execution),  # noqa: B008
    db: Database = Depends(get_db)) -> RunDiff:  # noqa: B008
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
def run_replay_script(execution_id: str = Depends(visible_execution),  # noqa: B008
                      db: Database = Depends(get_db)) -> Response:  # noqa: B008
    """The run's trajectory as a script for ``studio run --provider replay --script``."""
    _row_or_404(db, execution_id)
    events = [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]
    body = json.dumps(replay_script(events), indent=2, ensure_ascii=False)
    return Response(body, media_type="application/json", headers={
        "Content-Disposition": f'attachment; filename="replay-{execution_id}.json"'})


CallId = Annotated[str | None, Query(max_length=200, pattern=r"^[A-Za-z0-9._:-]+$",
                                     description="A tool call's id (else: a command node's "
                                                 "execution).")]


def _recorded(db: Database, execution_id: str, call_id: str | None) -> dict[str, Any]:
    """The command result the output is read from (404 ``not_found`` when there is none)."""
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    result: Any = row.result
    if call_id is not None:
        calls = [call for call in repository.tool_calls(execution_id) if call.call_id == call_id]
        result = (calls[0].envelope or {}).get("result") if calls else None
    if not isinstance(result, dict) or "exit_code" not in result:
        raise ApiError("no command output is recorded here", code=ErrorCode.NOT_FOUND,
                       details={"execution_id": execution_id, "call_id": call_id})
    return result


@router.get("/{execution_id}/output", responses={
    **NOT_FOUND_RESPONSE, 200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                                "description": "The recorded output (a download)."}},
            dependencies=[requires(Scope.READ)])
def run_output(execution_id: str = Depends(visible_execution),  # noqa: B008
               call_id: CallId = None,
               stream: Literal["stdout", "stderr"] = "stdout",
               db: Database = Depends(get_db)) -> Response:  # noqa: B008
    """The whole recorded stdout or stderr of a command (redacted as it was recorded)."""
    text = str(_recorded(db, execution_id, call_id).get(stream) or "")
    return Response(text.encode("utf-8"), media_type="text/plain; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="{stream}-{execution_id}.txt"'})
