"""Standalone executions: create (and run in the background), list, get, cancel, tool calls."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from services.api.auth import Scope, requires
from services.api.deps import get_db, get_launcher, get_settings
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.killswitch import KILLSWITCH_RESPONSE, refuse_while_engaged
from services.api.launcher import Launcher
from services.api.limits import check_limits
from services.api.schemas import (
    CancelAccepted,
    Execution,
    ExecutionCreate,
    ExecutionCreated,
    ExecutionList,
    ToolCall,
    ToolCallList,
)
from services.api.teams import Caller, caller, list_team, visible_execution
from services.db.executions import (
    ExecutionRepository,
    UnknownExecution,
    execution_to_json,
    tool_call_to_json,
)
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.runtime_settings import InvalidSettingValue
from services.db.session import Database
from services.db.status import ExecutionStatus
from services.execution.agent_profile import AgentProfile, ProfileError, primary_model
from services.execution.approvals import parse_policy
from services.execution.errors import ConfigError, ErrorCode
from services.execution.profile_checks import agent_profile
from services.execution.providers.profiles import provider_profile
from services.execution.providers.replay import load_script
from services.repos.urls import validate_repo_url
from services.runs.request import ExecutionRequest, create_execution
from services.runs.review_start import review_request
from services.settings import StudioSettings
from services.telemetry import tracing

router = APIRouter(prefix="/api/executions", tags=["executions"], responses=ERROR_RESPONSES)

_TEXT = r"^[^\x00-\x1f]*$"  # a filter is one line of text (PostgreSQL refuses NUL)


def _check_script(body: ExecutionCreate) -> None:
    if not provider_profile(body.provider).needs_script:
        if body.replay_script is not None:
            raise ApiError("replay_script is only for the replay provider",
                           code=ErrorCode.INVALID_ARGUMENTS, details={"field": "replay_script"})
        return
    if body.replay_script is None:
        raise ApiError("the replay provider needs replay_script",
                       code=ErrorCode.INVALID_ARGUMENTS, details={"field": "replay_script"})
    try:
        load_script(body.replay_script)
    except ConfigError as exc:
        raise ApiError(exc.message, code=ErrorCode.INVALID_ARGUMENTS,
                       details={"field": "replay_script"}) from exc


def request_profile(body: ExecutionCreate) -> AgentProfile:
    """The execution's role, system prompt, MCP servers and models, checked (422: ``unknown_role``,
    else ``invalid_arguments`` with the failing field and reason)."""
    try:
        return agent_profile(body.provider, body.model, role=body.role,
                             system_prompt=body.system_prompt, mcp_servers=body.mcp_servers,
                             models=body.models)
    except ProfileError as exc:
        code = ErrorCode.UNKNOWN_ROLE if exc.code == "unknown_role" else \
            ErrorCode.INVALID_ARGUMENTS
        raise ApiError(exc.message, code=code, details={"reason": exc.code}) from exc


REVIEW_FIXED = ("base_branch", "role", "system_prompt", "mcp_servers", "models",
                "approval_policy", "setup", "network_allowlist")


def create_review(body: ExecutionCreate, db: Database, settings: StudioSettings,
                  limits: dict[str, Any], who: Caller) -> str:
    """A review execution (:func:`services.runs.review_start.start_review`'s request): its
    tools, network, verdicts and prompt are the review's own, so fields that set them are
    refused (``invalid_arguments`` naming the field)."""
    given = body.model_dump(exclude_unset=True)
    fixed = [name for name in REVIEW_FIXED if given.get(name)]
    if body.pull_request or body.network != "offline":
        fixed.append("pull_request" if body.pull_request else "network")
    if body.prompt is not None:
        fixed.append("prompt")
    if body.pr is None or fixed:
        field = "pr" if body.pr is None else fixed[0]
        raise ApiError(f"a review needs pr and takes no {field}" if body.pr is not None else
                       "a review needs pr (the pull request number)",
                       code=ErrorCode.INVALID_ARGUMENTS, details={"field": field})
    try:
        request = review_request(db, settings, body.repo_url, body.pr, head_sha=body.head_sha,
                                 provider=body.provider, model=body.model,
                                 script=body.replay_script, limit_overrides=limits)
        return create_execution(db, request, Redactor.from_settings(settings),
                                settings=settings, team_id=who.team_id,
                                created_by=who.created_by)
    except (ConfigError, InvalidSettingValue) as exc:
        message = exc.message if isinstance(exc, ConfigError) else str(exc)
        details = exc.details if isinstance(exc, ConfigError) else {}
        raise ApiError(message, code=ErrorCode.INVALID_ARGUMENTS, details=details) from exc


def _found(db: Database, execution_id: str) -> NodeExecution:
    row = ExecutionRepository(db).get(execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    return row


@router.post("", status_code=202, response_model=ExecutionCreated,
             responses=KILLSWITCH_RESPONSE,
             dependencies=[requires(Scope.RUN), Depends(refuse_while_engaged)])
def create_execution_route(
    body: ExecutionCreate, response: Response, http_request: Request,
    db: Database = Depends(get_db),  # noqa: B008
    settings: StudioSettings = Depends(get_settings),  # noqa: B008
    launcher: Launcher = Depends(get_launcher),  # noqa: B008
    who: Caller = Depends(caller),  # noqa: B008
) -> ExecutionCreated:
    """Record an execution and run it in the background; answers its id (202). It belongs to
    the token's team (403 ``repository_not_in_team`` for a repository assigned to another)."""
    validate_repo_url(body.repo_url, from_api=True)
    _check_script(body)
    limits = body.limits.model_dump(exclude_none=True) if body.limits else {}
    check_limits(http_request, db, limits, "limits")
    if body.kind == "review":
        execution_id = create_review(body, db, settings, limits, who)
        launcher.launch(execution_id)
        response.headers["Location"] = f"/api/executions/{execution_id}"
        return ExecutionCreated(id=execution_id, status=ExecutionStatus.QUEUED)
    if body.prompt is None or body.pr is not None or body.head_sha is not None:
        raise ApiError("a change needs a prompt, and takes no pr or head_sha (those are for "
                       "kind review)", code=ErrorCode.INVALID_ARGUMENTS,
                       details={"field": "prompt" if body.prompt is None else "pr"})
    profile = request_profile(body)
    policy = parse_policy(body.approval_policy).as_json()  # invalid_approval_policy (422)
    request = ExecutionRequest(
        provider=body.provider, prompt=body.prompt, repo_url=body.repo_url,
        model=body.model or primary_model(profile),
        base_branch=body.base_branch, pull_request=body.pull_request, script=body.replay_script,
        limit_overrides=limits, profile=profile, approval_policy=policy,
        setup=tuple(body.setup), network=body.network,
        network_allowlist=tuple(body.network_allowlist))
    try:
        execution_id = create_execution(db, request, Redactor.from_settings(settings),
                                        settings=settings, team_id=who.team_id,
                                        created_by=who.created_by)
    except InvalidSettingValue as exc:
        raise ApiError(str(exc), code=ErrorCode.INVALID_ARGUMENTS) from exc
    tracing.annotate({"studio.execution_id": execution_id})
    launcher.launch(execution_id)
    response.headers["Location"] = f"/api/executions/{execution_id}"
    return ExecutionCreated(id=execution_id, status=ExecutionStatus.QUEUED)


@router.get("", response_model=ExecutionList, dependencies=[requires(Scope.READ)])
def list_executions(limit: int = Query(50, ge=1, le=500),
                    status: ExecutionStatus | None = None,
                    offset: int = Query(0, ge=0, le=1_000_000),
                    provider: str | None = Query(None, max_length=64, pattern=_TEXT),
                    repo_url: str | None = Query(None, max_length=2048, pattern=_TEXT),
                    flowchart_run_id: str | None = Query(None, max_length=64, pattern=_TEXT),
                    kind: Literal["standalone", "node"] | None = None,
                    search: str | None = Query(None, max_length=200, pattern=_TEXT),
                    team_id: str | None = Depends(list_team),  # noqa: B008
                    db: Database = Depends(get_db)) -> ExecutionList:  # noqa: B008
    """The most recent executions first (``offset`` skips that many), filtered by status,
    provider, repository, flowchart run, ``kind`` (``standalone`` or a flowchart ``node``'s),
    ``search`` (an id prefix or part of a branch name, as plain text) and ``team`` (a team's
    token sees its team's only)."""
    rows = ExecutionRepository(db).list(
        limit=limit, status=status, offset=offset, provider=provider, repo_url=repo_url,
        flowchart_run_id=flowchart_run_id, kind=kind, search=search or None, team_id=team_id)
    return ExecutionList(executions=[Execution(**execution_to_json(row)) for row in rows])


@router.get("/{execution_id}", response_model=Execution, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.READ)])
def get_execution(execution_id: str = Depends(visible_execution),  # noqa: B008
                  db: Database = Depends(get_db)) -> Execution:  # noqa: B008
    """One execution: status, settings snapshot, result, usage and cost."""
    return Execution(**execution_to_json(_found(db, execution_id)))


@router.post("/{execution_id}/cancel", status_code=202, response_model=CancelAccepted,
             responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.RUN)])
def cancel_execution(execution_id: str = Depends(visible_execution),  # noqa: B008
                     db: Database = Depends(get_db)) -> CancelAccepted:  # noqa: B008
    """Ask the execution to stop before its next model or tool call."""
    row = _found(db, execution_id)
    ExecutionRepository(db).request_cancel(execution_id)
    return CancelAccepted(id=execution_id, cancel_requested=True, status=row.status)


@router.get("/{execution_id}/tool-calls", response_model=ToolCallList,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.READ)])
def list_tool_calls(execution_id: str = Depends(visible_execution),  # noqa: B008
                    db: Database = Depends(get_db)) -> ToolCallList:  # noqa: B008
    """Every tool call of the execution with its outcome, in order."""
    _found(db, execution_id)
    calls = ExecutionRepository(db).tool_calls(execution_id)
    return ToolCallList(execution_id=execution_id,
                        tool_calls=[ToolCall(**tool_call_to_json(call)) for call in calls])
