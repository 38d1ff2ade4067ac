"""The dead-letter queue: executions whose every attempt ended with an infrastructure error.

``GET /api/executions?status=dead_lettered`` lists them; an admin re-drives one
(``POST /api/executions/{id}/retry``: queued again, resumed from its checkpoint) or discards it
(``POST /api/executions/{id}/discard``: ``failed``). Who (the bearer token's name) and when are
recorded in its ``operator_actions``; an execution that is not dead-lettered is
``not_dead_lettered`` (409), an unknown one, or another team's, 404 (a team's admin re-drives
its team's only).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from services.api.auth import Scope, ScopeRequirement, TokenIdentity
from services.api.deps import get_db, get_launcher
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.killswitch import node_dispatch
from services.api.launcher import Launcher
from services.api.schemas import Execution
from services.api.teams import visible_execution
from services.db.executions import ExecutionRepository, UnknownExecution, execution_to_json
from services.db.session import Database
from services.runs.retries import discard, redrive

router = APIRouter(prefix="/api/executions", tags=["dead letters"], responses=ERROR_RESPONSES)

ADMIN = ScopeRequirement(Scope.ADMIN)


def _shown(db: Database, execution_id: str) -> Execution:
    row = ExecutionRepository(db).get(execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    return Execution(**execution_to_json(row))


@router.post("/{execution_id}/retry", response_model=Execution, responses=NOT_FOUND_RESPONSE)
def retry_dead_lettered(
    request: Request,
    identity: TokenIdentity = Depends(ADMIN),  # noqa: B008
    execution_id: str = Depends(visible_execution),  # noqa: B008
    db: Database = Depends(get_db),  # noqa: B008
    launcher: Launcher = Depends(get_launcher),  # noqa: B008
) -> Execution:
    """Re-drive a dead-lettered execution: queued again and dispatched, it resumes from its
    checkpoint with a fresh round of attempts."""
    _shown(db, execution_id)
    redrive(db, execution_id, identity.name, launcher.launch, node_dispatch(request, db))
    return _shown(db, execution_id)


@router.post("/{execution_id}/discard", response_model=Execution, responses=NOT_FOUND_RESPONSE)
def discard_dead_lettered(
    request: Request,
    identity: TokenIdentity = Depends(ADMIN),  # noqa: B008
    execution_id: str = Depends(visible_execution),  # noqa: B008
    db: Database = Depends(get_db),  # noqa: B008
) -> Execution:
    """Discard a dead-lettered execution: it ends ``failed`` (``dead_lettered``)."""
    _shown(db, execution_id)
    discard(db, execution_id, identity.name, node_dispatch(request, db))
    return _shown(db, execution_id)
