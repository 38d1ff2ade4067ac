"""``FlowchartRepository``: flowcharts with their graph, and the rows of their runs.

A graph is stored as ``nodes`` (keyed by the node's id in the graph, ``Node.key``) and ``edges``
(``Edge.key``); replacing a graph keeps the row of every node whose id survives (node executions
point at it) and rewrites the edges. Each method is one transaction; the graph handed in must
already be validated (:func:`services.flowcharts.graph.parse_graph`). A graph comes in and goes
out in its JSON form (``{"nodes": [...], "edges": [...]}``, what
``FlowchartGraph.model_dump(mode="json")`` gives); the flowchart area turns it into its model, so
persistence never imports the area above it.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select

from services.db.base import utcnow
from services.db.errors import NotFound
from services.db.models import Edge, Flowchart, FlowchartRun, FlowchartRunNode, Node, NodeExecution
from services.db.session import Database, Session
from services.db.status import ExecutionStatus


class UnknownFlowchart(NotFound):
    """No flowchart has this id."""

    what = "flowchart"


class UnknownFlowchartRun(NotFound):
    """No flowchart run has this id."""

    what = "flowchart run"


@dataclass(frozen=True)
class StoredFlowchart:
    id: str
    name: str
    description: str
    graph: dict[str, Any]  # {"nodes": [...], "edges": [...]}, the JSON form of the graph model
    created_at: str
    updated_at: str
    team_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "description": self.description,
                "graph": self.graph,
                "created_at": self.created_at, "updated_at": self.updated_at,
                "team_id": self.team_id}


def _graph_of(session: Any, flowchart_id: str) -> dict[str, Any]:
    nodes = builtins.list(session.scalars(
        select(Node).where(Node.flowchart_id == flowchart_id).order_by(Node.key)))
    keys = {n.id: n.key for n in nodes}
    edges = session.scalars(select(Edge).where(Edge.flowchart_id == flowchart_id)
                            .order_by(Edge.key))
    return {
        "nodes": [{"id": n.key, "type": n.type, "name": n.name, "config": n.config}
                  for n in nodes],
        "edges": [{"id": e.key, "source": keys[e.source_node_id],
                   "target": keys[e.target_node_id], "condition": e.condition_key}
                  for e in edges],
    }


def _stored(session: Any, row: Flowchart) -> StoredFlowchart:
    return StoredFlowchart(id=row.id, name=row.name, description=row.description,
                           graph=_graph_of(session, row.id),
                           created_at=row.created_at.isoformat(),
                           updated_at=row.updated_at.isoformat(), team_id=row.team_id)


def _write_graph(session: Any, flowchart_id: str, graph: dict[str, Any]) -> None:
    existing = {n.key: n for n in session.scalars(
        select(Node).where(Node.flowchart_id == flowchart_id))}
    session.execute(delete(Edge).where(Edge.flowchart_id == flowchart_id))
    wanted = {n["id"] for n in graph["nodes"]}
    for key, row in existing.items():
        if key not in wanted:
            session.delete(row)
    rows: dict[str, Node] = {}
    for spec in graph["nodes"]:
        row = existing.get(spec["id"])
        if row is None:
            row = Node(flowchart_id=flowchart_id, key=spec["id"])
            session.add(row)
        row.type, row.name, row.config = spec["type"], spec.get("name", ""), spec.get("config", {})
        rows[spec["id"]] = row
    session.flush()
    for edge in graph["edges"]:
        session.add(Edge(flowchart_id=flowchart_id, key=edge["id"],
                         source_node_id=rows[edge["source"]].id,
                         target_node_id=rows[edge["target"]].id,
                         condition_key=edge.get("condition")))


class FlowchartRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def create(self, *, name: str, graph: dict[str, Any], description: str = "",
               team_id: str | None = None) -> str:
        with self._db.session() as session:
            row = Flowchart(name=name, description=description, team_id=team_id)
            session.add(row)
            session.flush()
            _write_graph(session, row.id, graph)
            return row.id

    def get(self, flowchart_id: str) -> StoredFlowchart:
        with self._db.session() as session:
            row = session.get(Flowchart, flowchart_id)
            if row is None:
                raise UnknownFlowchart(flowchart_id)
            return _stored(session, row)

    def list(self, *, limit: int = 100,
             team_id: str | None = None) -> builtins.list[StoredFlowchart]:
        """The most recent first (of ``team_id``'s team only, when given)."""
        query = select(Flowchart).order_by(Flowchart.created_at.desc()).limit(limit)
        if team_id is not None:
            query = query.where(Flowchart.team_id == team_id)
        with self._db.session() as session:
            rows = session.scalars(query)
            return [_stored(session, row) for row in rows]

    def update(self, flowchart_id: str, *, graph: dict[str, Any] | None = None,
               name: str | None = None, description: str | None = None) -> StoredFlowchart:
        """Rename, describe and/or replace the graph (runs keep the graph they started with)."""
        with self._db.session() as session:
            row = session.get(Flowchart, flowchart_id)
            if row is None:
                raise UnknownFlowchart(flowchart_id)
            if name is not None:
                row.name = name
            if description is not None:
                row.description = description
            if graph is not None:
                _write_graph(session, flowchart_id, graph)
            row.updated_at = utcnow()
            session.flush()
            return _stored(session, row)

    def delete(self, flowchart_id: str) -> None:
        """Delete a flowchart, its graph and its runs (their node executions stay)."""
        with self._db.session() as session:
            row = session.get(Flowchart, flowchart_id)
            if row is None:
                raise UnknownFlowchart(flowchart_id)
            session.delete(row)

    def node_row_ids(self, flowchart_id: str) -> dict[str, str]:
        """``{node key: node row id}`` of the flowchart's current graph."""
        with self._db.session() as session:
            rows = session.execute(select(Node.key, Node.id)
                                   .where(Node.flowchart_id == flowchart_id))
            return {key: row_id for key, row_id in rows}


def _when(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def run_to_json(run: FlowchartRun, nodes: builtins.list[FlowchartRunNode],
                waiting: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The public form of a run, with the state of every node (``awaiting_approval``: the
    keys in ``waiting``, running nodes whose execution waits for an approval)."""
    return {
        "id": run.id, "flowchart_id": run.flowchart_id, "status": run.status,
        "team_id": run.team_id,
        "inputs": run.inputs, "workspace": run.workspace,
        "max_node_executions": run.max_node_executions,
        "error_code": run.error_code, "error_message": run.error_message,
        "created_at": _when(run.created_at), "started_at": _when(run.started_at),
        "finished_at": _when(run.finished_at),
        "nodes": {n.node_key: {"type": n.type, "state": n.state,
                               "execution_id": n.execution_id, "result": n.result,
                               "error_code": n.error_code, "error_message": n.error_message,
                               "started_at": _when(n.started_at),
                               "finished_at": _when(n.finished_at),
                               "awaiting_approval": n.node_key in waiting} for n in nodes},
    }


def awaiting_approval(session: Session, nodes: builtins.list[FlowchartRunNode]) -> frozenset[str]:
    """The keys of the running nodes whose execution waits for an approval."""
    running = {n.execution_id: n.node_key for n in nodes
               if n.state == "running" and n.execution_id is not None}
    if not running:
        return frozenset()
    waiting = session.scalars(select(NodeExecution.id).where(
        NodeExecution.id.in_(sorted(running)),
        NodeExecution.status == ExecutionStatus.AWAITING_APPROVAL))
    return frozenset(running[i] for i in waiting)


def locked_run(session: Session, run_id: str) -> FlowchartRun:
    """The run row, locked for this transaction (SQLite: the whole database already is)."""
    run = session.scalars(select(FlowchartRun).where(FlowchartRun.id == run_id)
                          .with_for_update()).one_or_none()
    if run is None:
        raise UnknownFlowchartRun(run_id)
    return run


def run_nodes(session: Session, run_id: str) -> list[FlowchartRunNode]:
    """The run's node rows, by node key."""
    return list(session.scalars(select(FlowchartRunNode).where(FlowchartRunNode.run_id == run_id)
                                .order_by(FlowchartRunNode.node_key)))


def recent_runs(session: Session, *, flowchart_id: str | None = None,
                limit: int = 50, team_id: str | None = None) -> list[FlowchartRun]:
    """The most recent runs first (of one flowchart, or of all; of one team when given)."""
    query = select(FlowchartRun).order_by(FlowchartRun.created_at.desc()).limit(limit)
    if team_id is not None:
        query = query.where(FlowchartRun.team_id == team_id)
    if flowchart_id is not None:
        query = query.where(FlowchartRun.flowchart_id == flowchart_id)
    return list(session.scalars(query))


def run_owner(db: Database, run_id: str) -> tuple[str | None, tuple[str | None, str | None]]:
    """The team of a flowchart run and who started it (``(token id, name)``)."""
    with db.read_session() as session:
        found = session.execute(select(FlowchartRun.team_id, FlowchartRun.created_by_token,
                                       FlowchartRun.created_by)
                                .where(FlowchartRun.id == run_id)).first()
    if found is None:
        return None, (None, None)
    return found[0], (found[1], found[2])
