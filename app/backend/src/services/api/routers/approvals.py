"""Approvals of gated tool calls: list them, and decide one (approve or deny).

A decision is made once: repeating it answers the recorded one (``changed: false``), the other
decision is ``approval_already_decided`` (409); an approval of another execution, or none, is
``approval_not_found`` (404). The last decision of a waiting execution queues and dispatches it
again (``resumed: true``). Who decided is the bearer token's name.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Request

from services.api.auth import Scope, ScopeRequirement, TokenIdentity, requires
from services.api.deps import get_db, get_launcher, get_settings
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.killswitch import node_dispatch
from services.api.launcher import Launcher
from services.api.schemas import (
    EXECUTION_ID_PATTERN,
    Approval,
    ApprovalDecided,
    ApprovalDecision,
    ApprovalList,
)
from services.db.approvals import ApprovalRepository
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.redaction import Redactor
from services.db.session import Database
from services.runs.approvals import decide_approval
from services.settings import StudioSettings

router = APIRouter(prefix="/api/executions", tags=["approvals"], responses=ERROR_RESPONSES)

ExecutionId = Annotated[str, Path(pattern=EXECUTION_ID_PATTERN, description="An execution id.")]
ApprovalId = Annotated[str, Path(pattern=EXECUTION_ID_PATTERN, description="An approval id.")]


def _exists(db: Database, execution_id: str) -> None:
    if ExecutionRepository(db).get(execution_id) is None:
        raise UnknownExecution(execution_id)


@router.get("/{execution_id}/approvals", response_model=ApprovalList,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.READ)])
def list_approvals(execution_id: ExecutionId,
                   db: Database = Depends(get_db)) -> ApprovalList:  # noqa: B008
    """Every approval the execution's gated calls asked for, pending and decided, in order."""
    _exists(db, execution_id)
    return ApprovalList(execution_id=execution_id, approvals=[
        Approval(**a) for a in ApprovalRepository(db).of_execution(execution_id)])


@router.post("/{execution_id}/approvals/{approval_id}", response_model=ApprovalDecided,
             responses=NOT_FOUND_RESPONSE)
def decide(
    execution_id: ExecutionId, approval_id: ApprovalId, body: ApprovalDecision, request: Request,
    identity: TokenIdentity = Depends(ScopeRequirement(Scope.RUN)),  # noqa: B008
    db: Database = Depends(get_db),  # noqa: B008
    settings: StudioSettings = Depends(get_settings),  # noqa: B008
    launcher: Launcher = Depends(get_launcher),  # noqa: B008
) -> ApprovalDecided:
    """Approve or deny a pending approval; the execution resumes once none is pending (a
    flowchart node's through its node, which then advances its run)."""
    _exists(db, execution_id)
    decided = decide_approval(db, execution_id, approval_id, body.decision, by=identity.name,
                              reason=body.reason, dispatch=launcher.launch,
                              redactor=Redactor.from_settings(settings),
                              dispatch_node=node_dispatch(request, db))
    return ApprovalDecided(approval=Approval(**decided.approval), changed=decided.changed,
                           resumed=decided.resume)
