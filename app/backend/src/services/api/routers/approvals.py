"""Approvals of gated tool calls: list them, and decide one (approve or deny).

A decision is made once: repeating it answers the recorded one (``changed: false``), the other
decision is ``approval_already_decided`` (409); an approval of another execution, or none, is
``approval_not_found`` (404). The last decision of a waiting execution queues and dispatches it
again (``resumed: true``). Who decided is the bearer token's name.

Deciding needs the ``approve`` scope (``run`` is not enough), and the token that created the
execution may not decide its own calls (403 ``self_approval_refused``) unless the runtime
setting ``approval_self_allowed`` is on; the audit (the ``approval_decided`` event, the
approval's ``requested_by``) names both identities.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Request

from services.api.auth import Scope, ScopeRequirement, TokenIdentity, requires
from services.api.deps import get_db, get_launcher, get_settings
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.killswitch import node_dispatch
from services.api.launcher import Launcher
from services.api.schemas import (
    EXECUTION_ID_PATTERN,
    Approval,
    ApprovalDecided,
    ApprovalDecision,
    ApprovalList,
)
from services.api.teams import visible_execution
from services.db.approvals import ApprovalRepository
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.execution.errors import ErrorCode
from services.runs.approvals import decide_approval
from services.settings import StudioSettings

router = APIRouter(prefix="/api/executions", tags=["approvals"], responses=ERROR_RESPONSES)

ApprovalId = Annotated[str, Path(pattern=EXECUTION_ID_PATTERN, description="An approval id.")]


def _row(db: Database, execution_id: str) -> NodeExecution:
    row = ExecutionRepository(db).get(execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    return row


def _with_requester(approval: dict[str, Any], row: NodeExecution) -> Approval:
    return Approval(**{**approval, "requested_by": row.created_by})


@router.get("/{execution_id}/approvals", response_model=ApprovalList,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.READ)])
def list_approvals(execution_id: str = Depends(visible_execution),  # noqa: B008
                   db: Database = Depends(get_db)) -> ApprovalList:  # noqa: B008
    """Every approval the execution's gated calls asked for, pending and decided, in order."""
    row = _row(db, execution_id)
    return ApprovalList(execution_id=execution_id, approvals=[
        _with_requester(a, row) for a in ApprovalRepository(db).of_execution(execution_id)])


@router.post("/{execution_id}/approvals/{approval_id}", response_model=ApprovalDecided,
             responses=NOT_FOUND_RESPONSE)
def decide(
    approval_id: ApprovalId, body: ApprovalDecision, request: Request,
    identity: TokenIdentity = Depends(ScopeRequirement(Scope.APPROVE)),  # noqa: B008
    execution_id: str = Depends(visible_execution),  # noqa: B008
    db: Database = Depends(get_db),  # noqa: B008
    settings: StudioSettings = Depends(get_settings),  # noqa: B008
    launcher: Launcher = Depends(get_launcher),  # noqa: B008
) -> ApprovalDecided:
    """Approve or deny a pending approval (the ``approve`` scope; not the execution's own
    creator unless ``approval_self_allowed``); the execution resumes once none is pending (a
    flowchart node's through its node, which then advances its run)."""
    row = _row(db, execution_id)
    if row.created_by_token == identity.id and \
            not SettingsRepository(db).get("approval_self_allowed"):
        raise ApiError("the token that created this execution may not decide its own calls; "
                       "another holder of the 'approve' scope decides",
                       code=ErrorCode.SELF_APPROVAL_REFUSED,
                       details={"setting": "approval_self_allowed"})
    decided = decide_approval(db, execution_id, approval_id, body.decision, by=identity.name,
                              reason=body.reason, dispatch=launcher.launch,
                              redactor=Redactor.from_settings(settings),
                              dispatch_node=node_dispatch(request, db),
                              requested_by=row.created_by)
    return ApprovalDecided(approval=_with_requester(decided.approval, row),
                           changed=decided.changed, resumed=decided.resume)
