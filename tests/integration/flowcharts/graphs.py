"""Graphs for the flowchart tests: nodes, edges, replay agents and a branching flowchart.

Shared by the flowchart test modules (none of them imports another).
"""

from __future__ import annotations

from typing import Any

from services.db.flowcharts import FlowchartRepository
from services.db.session import Database
from services.flowcharts.graph import parse_graph


def final(status: str, summary: str) -> dict[str, Any]:
    return {"turns": [{"final": {"status": status, "summary": summary}}]}


def agent(prompt: str, script: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {"provider": "replay", "prompt": prompt, "replay_script": script, **config}


def node(node_id: str, node_type: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "config": config}


def edges(*pairs: tuple[str, str] | tuple[str, str, str]) -> list[dict[str, Any]]:
    out = []
    for index, pair in enumerate(pairs):
        edge: dict[str, Any] = {"id": f"e{index}", "source": pair[0], "target": pair[1]}
        if len(pair) == 3:
            edge["condition"] = pair[2]
        out.append(edge)
    return out


def create(db: Database, graph: dict[str, Any]) -> str:
    stored = parse_graph(graph).model_dump(mode="json")
    return FlowchartRepository(db).create(name="test", graph=stored)


def branching(fix_status: str) -> dict[str, Any]:
    return {
        "nodes": [
            node("start", "start"),
            node("fix", "agent", **agent("Fix the tests.", final(fix_status, "tests fixed"))),
            node("route", "decision", field="status"),
            node("ship", "agent", **agent("Ship it: {{ nodes.fix.result.summary }}",
                                          final("success", "shipped"))),
            node("retry", "agent", **agent("Try again after: {{ nodes.fix.result.summary }}",
                                           final("success", "retried"))),
            node("end", "end"),
        ],
        "edges": edges(("start", "fix"), ("fix", "route"), ("route", "ship", "success"),
                       ("route", "retry", "partial"), ("ship", "end"), ("retry", "end")),
    }
