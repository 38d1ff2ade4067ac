"""Flowchart traversal: which nodes run next, which are skipped, where a decision goes.

:func:`plan` is the traversal state machine; :func:`decide` evaluates a decision node.
Pure functions: nothing here touches the database.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from services.flowcharts.graph import (
    FINISHED_STATES,
    DecisionConfig,
    EdgeSpec,
    FlowchartGraph,
    NodeState,
)


def lookup(data: Any, path: str) -> Any:
    """The value at dotted ``path`` in ``data``; :class:`KeyError` naming the path if absent."""
    current = data
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise KeyError(path)
    return current


def condition_key(value: Any) -> str:
    """How a decision value compares with condition keys: JSON spelling for non-strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


# -- traversal --------------------------------------------------------------------------------

EdgeResolution = Literal["taken", "not_taken", "unresolved"]


@dataclass
class Plan:
    """Which pending nodes to run now, and which can no longer run (skipped)."""

    ready: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def edge_resolution(graph: FlowchartGraph, edge: EdgeSpec, states: dict[str, NodeState],
                    results: dict[str, dict[str, Any]]) -> EdgeResolution:
    state = states[edge.source]
    if state not in FINISHED_STATES:
        return "unresolved"
    if state is not NodeState.SUCCEEDED:
        return "not_taken"
    if graph.node(edge.source).type != "decision":
        return "taken"
    branch = results.get(edge.source, {}).get("branch")
    return "taken" if edge.condition == branch else "not_taken"


def plan(graph: FlowchartGraph, states: dict[str, NodeState],
         results: dict[str, dict[str, Any]]) -> Plan:
    """Ready: every incoming edge resolved and one taken; skipped: every one not taken.

    Skipping resolves the skipped node's outgoing edges as not taken, so it propagates (that is
    why fan-in waits only for inputs that can still arrive). ``states`` is not modified.
    """
    current = dict(states)
    result = Plan()
    changed = True
    while changed:
        changed = False
        for node in graph.nodes:
            if current[node.id] is not NodeState.PENDING or node.id in result.ready:
                continue
            incoming = graph.incoming(node.id)
            if not incoming:  # the start node
                result.ready.append(node.id)
                continue
            seen = {edge_resolution(graph, e, current, results) for e in incoming}
            if "unresolved" in seen:
                continue
            if "taken" in seen:
                result.ready.append(node.id)
            else:
                current[node.id] = NodeState.SKIPPED
                result.skipped.append(node.id)
                changed = True
    return result


def decide(graph: FlowchartGraph, node_id: str,
           results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Evaluate a decision: ``{field, source, value, branch}``; :class:`ValueError` if stuck."""
    config = DecisionConfig.model_validate(graph.node(node_id).config)
    source = config.source or graph.incoming(node_id)[0].source
    if source not in results:
        raise ValueError(f"decision {node_id!r}: node {source!r} has no result")
    try:
        value = lookup(results[source], config.field)
    except KeyError:
        raise ValueError(f"decision {node_id!r}: the result of node {source!r} has no field "
                         f"{config.field!r}") from None
    key = condition_key(value)
    branches = {e.condition for e in graph.outgoing(node_id)}
    branch = key if key in branches else config.default
    if branch is None:
        raise ValueError(f"decision {node_id!r}: {config.field}={key!r} matches none of the "
                         f"condition keys {sorted(b for b in branches if b)} and there is no "
                         "default")
    return {"field": config.field, "source": source, "value": value, "branch": branch}
