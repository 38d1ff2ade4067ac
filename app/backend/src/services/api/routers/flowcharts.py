"""Flowcharts and their runs: ``/api/flowcharts`` and ``/api/flowchart-runs``.

Scopes: ``read`` for every GET; ``run`` to create, replace or delete a flowchart (authoring is the
work of the people who run flowcharts; ``admin`` stays for operators' settings) and to start or
cancel a run. A graph whose nodes override operator settings (``__agent_runtime_cutover_enabled``)
is stored and started only for ``admin`` (``operator_override_refused``, 403:
:mod:`services.api.overrides`). A malformed graph is ``invalid_arguments`` (422) with
``details.problems``, each ``{code, node_id, edge_id, message}``.

The API never takes a filesystem path: a run gets a directory of its own under the deployment's
workspace root (:mod:`services.flowcharts.workspace`), and a node's ``config.workspace`` is a
relative name inside it. A body naming ``workspace`` is refused with ``host_path_refused`` (422).

Runs go through the injected :class:`~services.api.dispatch.WorkDispatch` (the worker's
``flowchart_dispatch`` in ``studio api``): a task per work node when a broker is configured, else a
``studio flowchart-node`` child process per node (:mod:`services.api.node_children`): no node ever
runs in the API's process.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi import Path as PathParam
from pydantic import BaseModel, ConfigDict, Field

from services.api.auth import Scope, requires
from services.api.deps import get_db, get_settings
from services.api.dispatch import WorkDispatch
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.killswitch import KILLSWITCH_RESPONSE, refuse_while_engaged
from services.api.limits import check_limits
from services.api.node_children import node_children
from services.api.overrides import check_operator_overrides
from services.api.teams import Caller, caller, list_team, visible_flowchart, visible_run
from services.db.flowcharts import FlowchartRepository
from services.db.mcp_servers import McpServerRepository
from services.db.session import Database
from services.db.teams import owning_team
from services.execution.errors import ErrorCode
from services.flowcharts.graph import (
    AgentConfig,
    FlowchartGraph,
    FlowchartValidationError,
    check_mcp_servers,
    parse_graph,
)
from services.flowcharts.service import FlowchartRunService, NodeDispatch
from services.settings import StudioSettings

log = logging.getLogger(__name__)
router = APIRouter(tags=["flowcharts"], responses=ERROR_RESPONSES)

Id = Annotated[str, PathParam(pattern=r"^[0-9a-f-]{36}$", description="A uuid.")]


class FlowchartCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    graph: dict[str, Any] = Field(description="{nodes: [{id, type, name?, config}], "
                                              "edges: [{id, source, target, condition?}]}")


class FlowchartUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = None
    graph: dict[str, Any] | None = None


class Flowchart(BaseModel):
    id: str
    name: str
    description: str
    graph: dict[str, Any]
    created_at: str
    updated_at: str
    team_id: str | None = None


class FlowchartList(BaseModel):
    flowcharts: list[Flowchart]


class RunCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = Field(default_factory=dict,
                                   description="Seen by templates as `inputs`.")
    workspace: str | None = Field(
        default=None, description="Refused (host_path_refused): the API never takes a filesystem "
                                  "path. The run gets a directory of its own.")
    max_node_executions: int | None = Field(default=None, ge=1, le=10_000)


class RunCreated(BaseModel):
    id: str
    status: str


class FlowchartRun(BaseModel):
    id: str
    flowchart_id: str
    team_id: str | None = None
    status: str
    inputs: dict[str, Any]
    workspace: str | None
    max_node_executions: int | None
    error_code: str | None
    error_message: str | None
    created_at: str | None
    started_at: str | None
    finished_at: str | None
    nodes: dict[str, dict[str, Any]] = Field(
        description="Per node id: type, state (pending, running, succeeded, failed, skipped, "
                    "cancelled), execution_id, result, error_code, error_message, timestamps, "
                    "awaiting_approval (a running node whose execution waits for an approval).")


class FlowchartRunList(BaseModel):
    runs: list[FlowchartRun]


def _graph(request: Request, data: dict[str, Any], db: Database,
           settings: StudioSettings) -> dict[str, Any]:
    """The graph validated (the MCP servers its nodes name are stored; operator overrides only
    from ``admin``: :mod:`services.api.overrides`), in the JSON form the repository stores."""
    try:
        graph = parse_graph(data)
        check_mcp_servers(graph, McpServerRepository(db, settings).names())
    except FlowchartValidationError as exc:
        raise ApiError(f"the flowchart is invalid: {exc}", code=ErrorCode.INVALID_ARGUMENTS,
                       details={"problems": exc.to_json()}) from exc
    check_operator_overrides(request, db, graph)
    return graph.model_dump(mode="json", by_alias=True)


def _check_run_limits(request: Request, db: Database, settings: StudioSettings,
                      graph: FlowchartGraph, max_node_executions: int | None) -> None:
    """The run's and each agent node's limits: above the deployment's needs ``admin``."""
    if max_node_executions is not None:
        check_limits(request, db, {"max_node_executions": max_node_executions},
                     "max_node_executions",
                     {"max_node_executions": settings.flowchart_max_node_executions})
    for node in graph.nodes:
        if node.type == "agent":
            check_limits(request, db, dict(AgentConfig.model_validate(node.config).limits),
                         f"nodes.{node.id}.config.limits")


def run_service(request: Request, db: Database = Depends(get_db),  # noqa: B008
                settings: StudioSettings = Depends(get_settings),  # noqa: B008
                ) -> FlowchartRunService:
    """The run service; its nodes go to the broker, else each to a child process."""
    work: WorkDispatch = request.app.state.dispatch  # the port create_app was given
    dispatch: NodeDispatch | None = work.flowchart_nodes
    if dispatch is None:
        dispatch = node_children(db, settings).dispatch
    return FlowchartRunService(db, settings, dispatch=dispatch)


@router.post("/api/flowcharts", status_code=201, response_model=Flowchart,
             dependencies=[requires(Scope.RUN)])
def create_flowchart(body: FlowchartCreate, response: Response, request: Request,
                     db: Database = Depends(get_db),  # noqa: B008
                     settings: StudioSettings = Depends(get_settings),  # noqa: B008
                     who: Caller = Depends(caller),  # noqa: B008
                     ) -> Flowchart:
    """Create a flowchart (the token's team's; a deployment-wide token's goes to ``default``);
    its graph is validated (422 names each node or edge at fault)."""
    repo = FlowchartRepository(db)
    flowchart_id = repo.create(name=body.name, description=body.description,
                               graph=_graph(request, body.graph, db, settings),
                               team_id=owning_team(db, None, who.team_id))
    response.headers["Location"] = f"/api/flowcharts/{flowchart_id}"
    return Flowchart(**repo.get(flowchart_id).to_json())


@router.get("/api/flowcharts", response_model=FlowchartList, dependencies=[requires(Scope.READ)])
def list_flowcharts(db: Database = Depends(get_db),  # noqa: B008
                    team_id: str | None = Depends(list_team),  # noqa: B008
                    ) -> FlowchartList:
    return FlowchartList(flowcharts=[Flowchart(**f.to_json())
                                     for f in FlowchartRepository(db).list(team_id=team_id)])


@router.get("/api/flowcharts/{flowchart_id}", response_model=Flowchart,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.READ)])
def get_flowchart(flowchart_id: str = Depends(visible_flowchart),  # noqa: B008
                  db: Database = Depends(get_db)) -> Flowchart:  # noqa: B008
    return Flowchart(**FlowchartRepository(db).get(flowchart_id).to_json())


@router.put("/api/flowcharts/{flowchart_id}", response_model=Flowchart,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.RUN)])
def update_flowchart(body: FlowchartUpdate, request: Request,
                     flowchart_id: str = Depends(visible_flowchart),  # noqa: B008
                     db: Database = Depends(get_db),  # noqa: B008
                     settings: StudioSettings = Depends(get_settings),  # noqa: B008
                     ) -> Flowchart:
    """Rename and/or replace the graph (runs already started keep their graph)."""
    graph = _graph(request, body.graph, db, settings) if body.graph is not None else None
    stored = FlowchartRepository(db).update(flowchart_id, graph=graph, name=body.name,
                                            description=body.description)
    return Flowchart(**stored.to_json())


@router.delete("/api/flowcharts/{flowchart_id}", status_code=204, responses=NOT_FOUND_RESPONSE,
               dependencies=[requires(Scope.RUN)])
def delete_flowchart(flowchart_id: str = Depends(visible_flowchart),  # noqa: B008
                     db: Database = Depends(get_db)) -> Response:  # noqa: B008
    FlowchartRepository(db).delete(flowchart_id)
    return Response(status_code=204)


@router.post("/api/flowcharts/{flowchart_id}/runs", status_code=202, response_model=RunCreated,
             responses={**NOT_FOUND_RESPONSE, **KILLSWITCH_RESPONSE},
             dependencies=[requires(Scope.RUN), Depends(refuse_while_engaged)])
def start_run(body: RunCreate, response: Response, request: Request,
              flowchart_id: str = Depends(visible_flowchart),  # noqa: B008
              db: Database = Depends(get_db),  # noqa: B008
              settings: StudioSettings = Depends(get_settings),  # noqa: B008
              service: FlowchartRunService = Depends(run_service),  # noqa: B008
              who: Caller = Depends(caller),  # noqa: B008
              ) -> RunCreated:
    """Start a run of the flowchart's current graph; poll ``/api/flowchart-runs/{id}``."""
    stored = FlowchartRepository(db).get(flowchart_id)
    if body.workspace is not None:
        raise ApiError("the API takes no filesystem path: a run gets a directory of its own "
                       "(local paths are for the CLI)", code=ErrorCode.HOST_PATH_REFUSED,
                       details={"field": "workspace"})
    graph = FlowchartGraph.model_validate(stored.graph)
    # a flowchart stored by ``admin`` (or before this rule) starts with its overrides only for
    # a caller who could have stored them
    check_operator_overrides(request, db, graph)
    _check_run_limits(request, db, settings, graph, body.max_node_executions)
    try:
        run_id = service.start(flowchart_id, inputs=body.inputs,
                               max_node_executions=body.max_node_executions,
                               created_by=who.created_by)
    except FlowchartValidationError as exc:  # stored before the rules of today
        raise ApiError(f"the flowchart is invalid: {exc}", code=ErrorCode.INVALID_ARGUMENTS,
                       details={"problems": exc.to_json()}) from exc
    response.headers["Location"] = f"/api/flowchart-runs/{run_id}"
    return RunCreated(id=run_id, status=service.get(run_id)["status"])


@router.get("/api/flowcharts/{flowchart_id}/runs", response_model=FlowchartRunList,
            dependencies=[requires(Scope.READ)])
def list_runs(flowchart_id: str = Depends(visible_flowchart),  # noqa: B008
              service: FlowchartRunService = Depends(run_service),  # noqa: B008
              ) -> FlowchartRunList:
    runs = service.list_runs(flowchart_id=flowchart_id)
    return FlowchartRunList(runs=[FlowchartRun(**run) for run in runs])


@router.get("/api/flowchart-runs/{run_id}", response_model=FlowchartRun,
            responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.READ)])
def get_run(run_id: str = Depends(visible_run),  # noqa: B008
            service: FlowchartRunService = Depends(run_service)) -> FlowchartRun:  # noqa: B008
    """The run and the state of each node, with its execution id and result."""
    return FlowchartRun(**service.get(run_id))


@router.post("/api/flowchart-runs/{run_id}/cancel", status_code=202, response_model=FlowchartRun,
             responses=NOT_FOUND_RESPONSE, dependencies=[requires(Scope.RUN)])
def cancel_run(run_id: str = Depends(visible_run),  # noqa: B008
               service: FlowchartRunService = Depends(run_service),  # noqa: B008
               ) -> FlowchartRun:
    """Cancel the run; every running node execution is asked to stop."""
    return FlowchartRun(**service.cancel(run_id))
