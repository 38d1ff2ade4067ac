"""Flowcharts, the pure part: the graph model, node configs and validation.

A flowchart is a directed acyclic graph of nodes (``start``, ``agent``, ``command``, ``decision``,
``end``) and edges (``source`` -> ``target``, a ``condition`` key on edges leaving a decision).
:func:`parse_graph` refuses a malformed graph with a :class:`FlowchartValidationError` that lists
every problem, each naming its node or edge. Templates are in :mod:`services.flowcharts.templates`,
the traversal state machine in :mod:`services.flowcharts.traversal`, runs in
:mod:`services.flowcharts.service`. Nothing here touches the database or runs anything.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from services.db.runtime_settings import OPERATOR_OVERRIDES
from services.execution.agent_profile import AgentProfile, ProfileError
from services.execution.approvals import Rule, parse_policy
from services.execution.errors import ConfigError, ErrorCode
from services.execution.profile_checks import agent_profile
from services.flowcharts.node_ids import NODE_ID_PATTERN
from services.flowcharts.templates import template_syntax_errors
from services.flowcharts.workspace import check_node_workspace_name
from services.repos.urls import RepositoryUrlRejected, validate_repo_url
from services.runs.setup_request import check_network, check_setup_commands

NODE_TYPES = ("start", "agent", "command", "review", "decision", "end")
# the nodes that are node executions
WORK_TYPES = frozenset({"agent", "command", "review"})


class NodeState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"


FINISHED_STATES = frozenset({NodeState.SUCCEEDED, NodeState.FAILED, NodeState.SKIPPED,
                             NodeState.CANCELLED})


class NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=NODE_ID_PATTERN)
    type: str
    name: str = ""
    config: dict[str, Any] = Field(default_factory=dict)


class EdgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=NODE_ID_PATTERN)
    source: str
    target: str
    condition: str | None = Field(default=None, min_length=1, max_length=100)


class FlowchartGraph(BaseModel):
    model_config = ConfigDict(extra="forbid")

    nodes: list[NodeSpec] = Field(default_factory=list)
    edges: list[EdgeSpec] = Field(default_factory=list)

    def node(self, node_id: str) -> NodeSpec:
        return next(n for n in self.nodes if n.id == node_id)

    def incoming(self, node_id: str) -> list[EdgeSpec]:
        return [e for e in self.edges if e.target == node_id]

    def outgoing(self, node_id: str) -> list[EdgeSpec]:
        return [e for e in self.edges if e.source == node_id]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def templates(self) -> list[str]:
        """The template sources of this node (checked for syntax at validation)."""
        return []


class StartConfig(_Config):
    pass


class EndConfig(_Config):
    pass


class AgentConfig(_Config):
    """An agent node: one node execution of FrontierAgent with a rendered prompt."""

    provider: str = Field(min_length=1)
    prompt: str = Field(min_length=1)
    model: str | None = None
    replay_script: dict[str, Any] | None = None
    # a subdirectory of the run's directory (a simple relative name), else the run's directory
    workspace: str | None = Field(default=None, max_length=800)
    # a repository instead of a workspace: the node clones it, works on its own branch and ends
    # in push and pull request, through the durable path (lease, resume, exactly-once push)
    repo_url: str | None = None
    base_branch: str | None = None
    pull_request: bool = True
    github_repo: str | None = None
    limits: dict[str, Any] = Field(default_factory=dict)
    continue_on_failure: bool = False
    cutover_override: bool | None = Field(default=None, alias="__agent_runtime_cutover_enabled")
    role: str | None = None  # services.execution.roles
    system_prompt: str | None = None
    mcp_servers: list[str] | None = None  # stored MCP servers (services.db.mcp_servers)
    models: list[Any] | None = None  # fallback order (services.execution.agent_profile)
    # services.execution.approvals (checked by _check_node: invalid_approval_policy)
    approval_policy: Any = None
    # repository nodes: setup commands, and the agent's network (services.runs.setup_request)
    setup: list[str] = Field(default_factory=list)
    network: str = "offline"
    network_allowlist: list[str] = Field(default_factory=list)

    @field_validator("workspace")
    @classmethod
    def _relative_workspace(cls, value: str | None) -> str | None:
        return None if value is None else check_node_workspace_name(value)

    @model_validator(mode="after")
    def _repository(self) -> AgentConfig:
        if self.repo_url is not None:
            if self.workspace is not None:
                raise ValueError("give a workspace or a repo_url, not both")
            try:
                validate_repo_url(self.repo_url, from_api=True)
            except RepositoryUrlRejected as exc:
                raise ValueError(exc.message) from None
        try:
            check_setup_commands(self.setup)
            check_network(self.network, self.network_allowlist)
        except ConfigError as exc:
            raise ValueError(exc.message) from None
        if self.repo_url is None and (self.setup or self.network != "offline"
                                      or self.network_allowlist):
            raise ValueError("setup, network and network_allowlist need a repo_url")
        return self

    def templates(self) -> list[str]:
        return [self.prompt]

    def profile(self) -> AgentProfile:
        """The node's role, system prompt, MCP servers and models, checked
        (:class:`ProfileError` with a stable code)."""
        return agent_profile(self.provider, self.model, role=self.role,
                             system_prompt=self.system_prompt, mcp_servers=self.mcp_servers,
                             models=self.models)


class CommandConfig(_Config):
    """A command node: one ``command.run`` in the run's workspace (argv items are templates)."""

    argv: list[str] | None = None
    command: str | None = None
    cwd: str = "."
    timeout_s: float = Field(default=120.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    continue_on_failure: bool = False

    @model_validator(mode="after")
    def _one_form(self) -> CommandConfig:
        if (self.argv is None) == (self.command is None):
            raise ValueError("give exactly one of argv or command")
        if self.argv is not None and not self.argv:
            raise ValueError("argv must not be empty")
        return self

    def templates(self) -> list[str]:
        return list(self.argv or []) + ([self.command] if self.command else [])


class ReviewConfig(_Config):
    """A review node: one review execution of pull request ``pr`` (services.runs.review_start);
    its tools, network and verdicts are the review's own, so it has no role, setup or policy."""

    provider: str = Field(min_length=1)
    repo_url: str = Field(min_length=1)
    pr: int = Field(ge=1, le=9_999_999)
    head_sha: str | None = Field(default=None, pattern=r"^[0-9a-f]{40}$")
    model: str | None = None
    replay_script: dict[str, Any] | None = None
    github_repo: str | None = None
    continue_on_failure: bool = False

    @field_validator("repo_url")
    @classmethod
    def _repository(cls, value: str) -> str:
        try:
            validate_repo_url(value, from_api=True)
        except RepositoryUrlRejected as exc:
            raise ValueError(exc.message) from None
        return value

    def templates(self) -> list[str]:
        return []


class DecisionConfig(_Config):
    """Routes on ``field`` (a dotted path) of the result of ``source`` (default: its one input)."""

    field: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
    source: str | None = None
    default: str | None = None


CONFIG_MODELS: dict[str, type[_Config]] = {
    "start": StartConfig, "agent": AgentConfig, "command": CommandConfig, "review": ReviewConfig,
    "decision": DecisionConfig, "end": EndConfig,
}


class Problem(BaseModel):
    """One thing wrong with a graph: ``code``, the node or edge it is about, a message."""

    code: str
    node_id: str | None = None
    edge_id: str | None = None
    message: str


class FlowchartValidationError(ValueError):
    """A malformed flowchart; ``problems`` names each node or edge at fault."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        super().__init__("; ".join(p.message for p in problems))

    def to_json(self) -> list[dict[str, Any]]:
        return [p.model_dump() for p in self.problems]


def parse_graph(data: Any) -> FlowchartGraph:
    """The graph in ``data`` validated structurally and semantically (see the module doc)."""
    try:
        graph = FlowchartGraph.model_validate(data)
    except ValidationError as exc:
        raise FlowchartValidationError([_structural_problem(data, err) for err in exc.errors()])\
            from None
    validate_graph(graph)
    return graph


def _structural_problem(data: Any, err: Any) -> Problem:
    loc = list(err["loc"])
    where = ".".join(str(part) for part in loc)
    problem = Problem(code="invalid_graph", message=f"{where}: {err['msg']}")
    if len(loc) >= 2 and loc[0] in ("nodes", "edges") and isinstance(loc[1], int):
        try:
            item_id = data[loc[0]][loc[1]].get("id")
        except (KeyError, IndexError, TypeError, AttributeError):
            item_id = None
        if isinstance(item_id, str):
            kind = "node" if loc[0] == "nodes" else "edge"
            problem.message = f"{kind} {item_id!r}: {'.'.join(map(str, loc[2:]))}: {err['msg']}"
            if kind == "node":
                problem.node_id = item_id
            else:
                problem.edge_id = item_id
    return problem


def validate_graph(graph: FlowchartGraph) -> None:
    """Raise :class:`FlowchartValidationError` listing every problem of ``graph``."""
    problems = _check_ids(graph)
    problems += _check_nodes(graph)
    problems += _check_edges(graph)
    if not problems:  # reachability needs sound ids and edges
        problems += _check_shape(graph)
    if problems:
        raise FlowchartValidationError(problems)


def _check_ids(graph: FlowchartGraph) -> list[Problem]:
    problems: list[Problem] = []
    for kind, items in (("node", graph.nodes), ("edge", graph.edges)):
        seen: set[str] = set()
        for item in items:
            if item.id in seen:
                key = {"node_id": item.id} if kind == "node" else {"edge_id": item.id}
                problems.append(Problem(code=f"duplicate_{kind}_id", **key,
                                        message=f"{kind} id {item.id!r} is used twice"))
            seen.add(item.id)
    return problems


def _check_nodes(graph: FlowchartGraph) -> list[Problem]:
    problems: list[Problem] = []
    starts = [n for n in graph.nodes if n.type == "start"]
    if not starts:
        problems.append(Problem(code="no_start", message="the flowchart has no start node"))
    for extra in starts[1:]:
        problems.append(Problem(code="multiple_starts", node_id=extra.id,
                                message=f"node {extra.id!r} is a second start node "
                                        f"(the first is {starts[0].id!r})"))
    if not any(n.type == "end" for n in graph.nodes):
        problems.append(Problem(code="no_end", message="the flowchart has no end node"))
    for node in graph.nodes:
        problems += _check_node(graph, node)
    return problems


def _check_node(graph: FlowchartGraph, node: NodeSpec) -> list[Problem]:
    model = CONFIG_MODELS.get(node.type)
    if model is None:
        return [Problem(code="unknown_node_type", node_id=node.id,
                        message=f"node {node.id!r} has unknown type {node.type!r} "
                                f"(one of {', '.join(NODE_TYPES)})")]
    try:
        config = model.model_validate(node.config)
    except ValidationError as exc:
        return [Problem(code="invalid_config", node_id=node.id,
                        message=f"node {node.id!r} config: "
                                f"{'.'.join(map(str, e['loc'])) or '(config)'}: {e['msg']}")
                for e in exc.errors()]
    if isinstance(config, AgentConfig):
        try:
            config.profile()
        except ProfileError as exc:
            return [Problem(code=exc.code, node_id=node.id,
                            message=f"node {node.id!r}: {exc.message}")]
    problems = [Problem(code="template_syntax", node_id=node.id,
                        message=f"node {node.id!r}: template syntax error: {msg}")
                for msg in template_syntax_errors(config.templates())]
    if isinstance(config, DecisionConfig):
        problems += _check_decision(graph, node.id, config)
    if isinstance(config, AgentConfig) and config.approval_policy is not None:
        problems += _check_approval_policy(node.id, config.approval_policy,
                                           durable=config.repo_url is not None)
    return problems


def operator_overrides(graph: FlowchartGraph) -> list[Problem]:
    """Each node config key that overrides an operator's runtime setting (every ``__``-prefixed
    key: :data:`~services.db.runtime_settings.OPERATOR_OVERRIDES`; ``null`` overrides nothing),
    as an ``operator_override_refused`` problem naming its node: what only ``admin`` (or the
    runtime setting ``node_overrides_allowed``) may store or start (:mod:`services.api`)."""
    problems: list[Problem] = []
    for node in graph.nodes:
        for key in sorted(k for k in node.config if k.startswith("__")):
            if node.config[key] is None:
                continue
            setting = OPERATOR_OVERRIDES.get(key)
            what = (f"overrides the operator's runtime setting {setting!r}" if setting
                    else "is an operator override")
            problems.append(Problem(
                code="operator_override_refused", node_id=node.id,
                message=f"node {node.id!r}: config key {key!r} {what}"))
    return problems


def check_mcp_servers(graph: FlowchartGraph, stored: set[str]) -> None:
    """Raise :class:`FlowchartValidationError` for each agent node naming an MCP server that
    is not stored (``unknown_mcp_server``, the node named)."""
    problems: list[Problem] = []
    for node in graph.nodes:
        if node.type != "agent":
            continue
        names = AgentConfig.model_validate(node.config).mcp_servers or []
        problems += [Problem(code="unknown_mcp_server", node_id=node.id,
                             message=f"node {node.id!r} names MCP server {name!r}, which is "
                                     "not stored (studio mcp list)")
                     for name in names if name not in stored]
    if problems:
        raise FlowchartValidationError(problems)
def _check_approval_policy(node_id: str, raw: Any, *, durable: bool) -> list[Problem]:
    """A node's ``approval_policy``: valid, and ``require`` only on a repository node (durable:
    its execution waits for the decision and is resumed through the node; a node working in
    place has no resume to wait for)."""
    try:
        policy = parse_policy(raw)
    except ConfigError as exc:
        return [Problem(code=ErrorCode.INVALID_APPROVAL_POLICY.value, node_id=node_id,
                        message=f"node {node_id!r}: {exc.message}")]
    if not durable and Rule.REQUIRE in policy.rules.values():
        return [Problem(code=ErrorCode.INVALID_APPROVAL_POLICY.value, node_id=node_id,
                        message=f"node {node_id!r}: only a node with a repository (repo_url) "
                                "can wait for an approval (\"require\"); use \"allow\" or "
                                "\"deny\"")]
    return []


def _check_decision(graph: FlowchartGraph, node_id: str, config: DecisionConfig) -> list[Problem]:
    ids = {n.id for n in graph.nodes}
    sources = {e.source for e in graph.incoming(node_id)}
    if config.source is not None and config.source not in ids:
        return [Problem(code="unknown_decision_source", node_id=node_id,
                        message=f"decision {node_id!r} reads node {config.source!r}, "
                                "which does not exist")]
    if config.source is None and len(sources) != 1:
        return [Problem(code="decision_source_required", node_id=node_id,
                        message=f"decision {node_id!r} has {len(sources)} input nodes: "
                                "name the one to read with config.source")]
    keys = {e.condition for e in graph.outgoing(node_id)}
    if config.default is not None and config.default not in keys:
        return [Problem(code="unknown_default_branch", node_id=node_id,
                        message=f"decision {node_id!r}: default {config.default!r} is not the "
                                "condition key of one of its edges")]
    return []


def _check_edges(graph: FlowchartGraph) -> list[Problem]:
    types = {n.id: n.type for n in graph.nodes}
    problems: list[Problem] = []
    conditions: set[tuple[str, str]] = set()
    for edge in graph.edges:
        for end, node_id in (("source", edge.source), ("target", edge.target)):
            if node_id not in types:
                problems.append(Problem(code="dangling_edge", edge_id=edge.id,
                                        message=f"edge {edge.id!r}: unknown {end} node "
                                                f"{node_id!r}"))
        source_type = types.get(edge.source)
        if source_type is None:
            continue
        if source_type == "decision" and edge.condition is None:
            problems.append(Problem(code="missing_condition", edge_id=edge.id,
                                    message=f"edge {edge.id!r} leaves decision {edge.source!r} "
                                            "without a condition key"))
        elif source_type != "decision" and edge.condition is not None:
            problems.append(Problem(code="condition_not_allowed", edge_id=edge.id,
                                    message=f"edge {edge.id!r} has condition key "
                                            f"{edge.condition!r} but its source {edge.source!r} "
                                            "is not a decision"))
        elif edge.condition is not None and (edge.source, edge.condition) in conditions:
            problems.append(Problem(code="duplicate_condition", edge_id=edge.id,
                                    message=f"edge {edge.id!r}: decision {edge.source!r} already "
                                            f"has an edge for condition {edge.condition!r}"))
        if edge.condition is not None:
            conditions.add((edge.source, edge.condition))
        if types.get(edge.target) == "start":
            problems.append(Problem(code="edge_into_start", edge_id=edge.id,
                                    message=f"edge {edge.id!r} leads into the start node"))
        if source_type == "end":
            problems.append(Problem(code="edge_from_end", edge_id=edge.id,
                                    message=f"edge {edge.id!r} leaves end node {edge.source!r}"))
    return problems


def _closure(start: list[str], step: dict[str, list[str]]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for nxt in step.get(todo.pop(), []):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _check_shape(graph: FlowchartGraph) -> list[Problem]:
    forward: dict[str, list[str]] = {}
    backward: dict[str, list[str]] = {}
    for edge in graph.edges:
        forward.setdefault(edge.source, []).append(edge.target)
        backward.setdefault(edge.target, []).append(edge.source)
    start = next(n.id for n in graph.nodes if n.type == "start")
    reachable = _closure([start], forward)
    reaches_end = _closure([n.id for n in graph.nodes if n.type == "end"], backward)
    problems: list[Problem] = []
    for node in graph.nodes:
        if node.id not in reachable:
            problems.append(Problem(code="unreachable_node", node_id=node.id,
                                    message=f"node {node.id!r} cannot be reached from the start "
                                            f"node {start!r}"))
        if node.id not in reaches_end:
            problems.append(Problem(code="no_path_to_end", node_id=node.id,
                                    message=f"no end node can be reached from node {node.id!r}"))
    cycle_edge = _find_cycle(graph, forward)
    if cycle_edge is not None:
        problems.append(Problem(code="cycle", edge_id=cycle_edge.id,
                                message=f"edge {cycle_edge.id!r} ({cycle_edge.source} -> "
                                        f"{cycle_edge.target}) closes a cycle; flowcharts are "
                                        "acyclic"))
    return problems


def _find_cycle(graph: FlowchartGraph, forward: dict[str, list[str]]) -> EdgeSpec | None:
    """An edge that closes a cycle (a back edge of a depth-first search), if any."""
    colour: dict[str, int] = {}
    for root in (n.id for n in graph.nodes):
        if root in colour:
            continue
        stack: list[tuple[str, int]] = [(root, 0)]
        colour[root] = 1
        while stack:
            node, index = stack.pop()
            targets = forward.get(node, [])
            if index >= len(targets):
                colour[node] = 2
                continue
            stack.append((node, index + 1))
            target = targets[index]
            if colour.get(target) == 1:
                return next(e for e in graph.edges if e.source == node and e.target == target)
            if target not in colour:
                colour[target] = 1
                stack.append((target, 0))
    return None

