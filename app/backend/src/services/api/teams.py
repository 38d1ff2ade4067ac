"""Team isolation for every route: who the caller is, and the one way to load a team's object.

A token of a team sees that team's executions, flowcharts, flowchart runs, approvals and MCP
servers only; a deployment-wide token (``team_id`` NULL: every token made before teams existed,
and operators') sees every team's. Another team's object answers **404** exactly like one that
does not exist (its existence is not confirmed).

A route that takes an object's id declares it with one of the ``visible_*`` dependencies (in
the route's parameters: it runs before the body is validated, so a foreign id is a 404 whatever
the body), e.g.::

    @router.get("/{execution_id}/thing", dependencies=[requires(Scope.READ)])
    def thing(row: NodeExecution = Depends(visible_execution)) -> ...

A new kind of object gets its dependency from :func:`visible_by_id` in one line. Lists filter by
:func:`list_team` (``?team=`` for deployment-wide callers). Routes that act on the deployment
itself (settings, the kill switch, the operator pages) add :func:`deployment_wide`. The
acceptance test ``tests/integration/api/test_team_isolation.py`` walks every route of the
OpenAPI document with another team's ids and fails for a route without the check (its allow-list
names the few legitimately team-less routes).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio.to_thread
from fastapi import Depends, Path, Query, Request

from services.api.auth import TokenIdentity, authenticate
from services.api.errors import ApiError
from services.api.schemas import EXECUTION_ID_PATTERN
from services.db.errors import NotFound
from services.db.executions import UnknownExecution
from services.db.flowcharts import UnknownFlowchart, UnknownFlowchartRun
from services.db.mcp_servers import UnknownMcpServer
from services.db.models import Flowchart, FlowchartRun, McpServer, NodeExecution
from services.db.session import Database
from services.db.teams import TEAM_NAME, TeamStore, team_of_row
from services.execution.errors import ErrorCode
from services.execution.mcp.config import SERVER_NAME_PATTERN

__all__ = ["Caller", "caller", "deployment_wide", "list_team", "visible_by_id",
           "visible_execution", "visible_flowchart", "visible_mcp_server", "visible_run"]

NO_TEAM = "-"  # a team id no row has: a team caller's filter naming another team


@dataclass(frozen=True)
class Caller:
    """The verified token and the team it belongs to (``None``: deployment-wide)."""

    identity: TokenIdentity

    @property
    def team_id(self) -> str | None:
        return self.identity.team_id

    @property
    def deployment_wide(self) -> bool:
        return self.identity.team_id is None

    def sees(self, team_id: str | None) -> bool:
        return self.deployment_wide or team_id == self.identity.team_id

    @property
    def created_by(self) -> tuple[str, str]:
        """``(token id, token name)``: recorded on what the caller creates."""
        return self.identity.id, self.identity.name


async def caller(request: Request) -> Caller:
    """The caller of a route that declared a scope (its token is verified already)."""
    return Caller(await authenticate(request))


def deployment_wide(who: Caller = Depends(caller)) -> Caller:  # noqa: B008
    """For routes that act on the whole deployment: a team's token is ``deployment_wide_only``
    (403)."""
    if not who.deployment_wide:
        raise ApiError("this endpoint is for deployment-wide tokens (operators), not a team's",
                       code=ErrorCode.DEPLOYMENT_WIDE_ONLY)
    return who


TeamFilter = Annotated[str | None, Query(max_length=64, pattern=TEAM_NAME.pattern,
                                         description="Only this team's (deployment-wide "
                                                     "tokens; a team's token sees its own "
                                                     "only).")]


def list_team(request: Request, team: TeamFilter = None,
              who: Caller = Depends(caller)) -> str | None:  # noqa: B008
    """The team id a list is filtered by: a team caller's own team; for a deployment-wide
    caller the ``team`` query parameter's (404 ``not_found`` for an unknown team), else none."""
    if not who.deployment_wide:
        if team is None:
            return who.team_id
        names = TeamStore(request.app.state.db).names()
        return who.team_id if names.get(who.team_id or "") == team else NO_TEAM
    if team is None:
        return None
    return TeamStore(request.app.state.db).id_of(team)  # UnknownTeam: 404


def check_visible(db: Database, who: Caller, model: Any, key: Any, ident: str,
                  not_found: Callable[[str], NotFound]) -> None:
    """Raise ``not_found(ident)`` (404) unless the row exists and ``who`` sees its team."""
    found, team_id = team_of_row(db, model, key, ident)
    if not found or not who.sees(team_id):
        raise not_found(ident)


def visible_by_id(model: Any, key: Any, not_found: Callable[[str], NotFound],
                  param: str, pattern: str, description: str) -> Callable[..., Any]:
    """A dependency taking the path parameter ``param`` (``pattern``) that answers its value
    once the row of ``model`` it names is visible to the caller, else raises ``not_found``."""

    async def dependency(request: Request, who: Caller = Depends(caller),  # noqa: B008
                         **path: str) -> str:
        ident = path[param]
        await anyio.to_thread.run_sync(check_visible, request.app.state.db, who, model, key,
                                       ident, not_found)
        return ident

    parameters = [
        inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                          annotation=Request),
        inspect.Parameter("who", inspect.Parameter.KEYWORD_ONLY, annotation=Caller,
                          default=Depends(caller)),
        inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY,
                          annotation=Annotated[str, Path(pattern=pattern,
                                                         description=description)]),
    ]
    dependency.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    dependency.__name__ = f"visible_{param}"
    return dependency


UUID = r"^[0-9a-f-]{36}$"
visible_execution = visible_by_id(NodeExecution, NodeExecution.id, UnknownExecution,
                                  "execution_id", EXECUTION_ID_PATTERN, "An execution id.")
visible_flowchart = visible_by_id(Flowchart, Flowchart.id, UnknownFlowchart, "flowchart_id",
                                  UUID, "A uuid.")
visible_run = visible_by_id(FlowchartRun, FlowchartRun.id, UnknownFlowchartRun, "run_id", UUID,
                            "A uuid.")
visible_mcp_server = visible_by_id(McpServer, McpServer.name, UnknownMcpServer, "name",
                                   SERVER_NAME_PATTERN, "A server's name.")
