"""Stored MCP servers (``admin``): create, list, get, delete. Secrets never come back.

A body is one server in the shape of an entry of ``STUDIO_MCP_CONFIG`` plus its ``name``;
``env`` and ``headers`` are stored encrypted (:mod:`services.db.mcp_servers`) and answered only
as the names of their keys (``secret_keys``).
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import Scope, requires
from services.api.deps import get_db, get_settings
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE
from services.api.teams import Caller, caller, list_team, visible_mcp_server
from services.db.mcp_servers import McpServerRepository
from services.db.session import Database
from services.db.teams import owning_team
from services.execution.mcp.config import SERVER_NAME_PATTERN
from services.runs.mcp_confinement import check_stored_server
from services.settings import StudioSettings

router = APIRouter(prefix="/api/mcp-servers", tags=["mcp-servers"], responses=ERROR_RESPONSES)

ServerName = Annotated[str, Path(pattern=SERVER_NAME_PATTERN, description="A server's name.")]


class McpServerCreate(BaseModel):
    """One server: ``name``, ``transport`` (``stdio`` or ``http``) and that transport's fields."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=SERVER_NAME_PATTERN)
    transport: str = Field(description="stdio | http")


class McpServerOut(BaseModel):
    name: str
    transport: str
    config: dict[str, Any] = Field(description="The server's fields without env and headers.")
    secret_keys: dict[str, list[str]] = Field(
        description="The names of the stored env / headers entries (never their values).")
    enabled: bool
    created_at: str | None
    team_id: str | None = None


class McpServerList(BaseModel):
    servers: list[McpServerOut]


@router.post("", status_code=201, response_model=McpServerOut,
             dependencies=[requires(Scope.ADMIN)])
def create_server(body: McpServerCreate, response: Response,
                  db: Database = Depends(get_db),  # noqa: B008
                  settings: StudioSettings = Depends(get_settings),  # noqa: B008
                  who: Caller = Depends(caller),  # noqa: B008
                  ) -> McpServerOut:
    """Store a server (the token's team's; a deployment-wide token's belongs to ``default``).
    409 ``mcp_server_exists`` when the name is taken; 422
    ``host_not_allowed`` for a URL whose host the repository host rules refuse, 422
    ``invalid_arguments`` for a URL with a credential, query or fragment, or a stdio ``cwd``)."""
    data = body.model_dump()
    name = data.pop("name")
    check = functools.partial(check_stored_server, settings, allow_loopback=False)
    stored = McpServerRepository(db, settings).create(name, data, check,
                                                      team_id=owning_team(db, None, who.team_id))
    response.headers["Location"] = f"/api/mcp-servers/{name}"
    return McpServerOut(**stored)


@router.get("", response_model=McpServerList, dependencies=[requires(Scope.ADMIN)])
def list_servers(db: Database = Depends(get_db),  # noqa: B008
                 settings: StudioSettings = Depends(get_settings),  # noqa: B008
                 team_id: str | None = Depends(list_team),  # noqa: B008
                 ) -> McpServerList:
    return McpServerList(servers=[McpServerOut(**item) for item in
                                  McpServerRepository(db, settings).list_servers(team_id)])


@router.get("/{name}", response_model=McpServerOut, responses=NOT_FOUND_RESPONSE,
            dependencies=[requires(Scope.ADMIN)])
def get_server(name: str = Depends(visible_mcp_server),  # noqa: B008
               db: Database = Depends(get_db),  # noqa: B008
               settings: StudioSettings = Depends(get_settings),  # noqa: B008
               ) -> McpServerOut:
    return McpServerOut(**McpServerRepository(db, settings).describe(name))


@router.delete("/{name}", status_code=204, responses=NOT_FOUND_RESPONSE,
               dependencies=[requires(Scope.ADMIN)])
def delete_server(name: str = Depends(visible_mcp_server),  # noqa: B008
                  db: Database = Depends(get_db),  # noqa: B008
                  settings: StudioSettings = Depends(get_settings),  # noqa: B008
                  ) -> Response:
    """Delete a server; agents naming it are refused from then on (``unknown_mcp_server``)."""
    McpServerRepository(db, settings).delete(name)
    return Response(status_code=204)
