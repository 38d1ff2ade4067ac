"""An agent node's ``approval_policy`` reaches its execution: two nodes of one flowchart, in
process, on SQLite and PostgreSQL; the node that denies ``command.*`` gets ``permission_denied``
without the command running (the decision on the call's record and in the journal), the other
one runs the same command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.session import Database
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, create, edges, node
from tests.support.redaction import settings_redactor


def _script(name: str) -> dict[str, Any]:
    return {"turns": [
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sh", "-c", f"echo ran > {name}.txt"]}}]},
        {"final": {"status": "success", "summary": name}}]}


def test_each_agent_node_gets_its_own_approval_policy(db: Database, settings: StudioSettings,
                                                      ws: Path) -> None:
    graph = {"nodes": [
        node("start", "start"),
        node("guarded", "agent", **agent("guarded", _script("guarded"),
                                         approval_policy={"command.*": "deny"})),
        node("free", "agent", **agent("free", _script("free"))),
        node("end", "end")],
        "edges": edges(("start", "guarded"), ("guarded", "free"), ("free", "end"))}
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "succeeded", run
    executions = ExecutionRepository(db, settings_redactor())
    outcomes = {}
    for name in ("guarded", "free"):
        execution_id = run["nodes"][name]["execution_id"]
        results = [e.data for e in executions.events(execution_id) if e.kind == "tool_result"]
        assert len(results) == 1
        outcomes[name] = (results[0]["envelope"]["ok"],
                          (results[0].get("approval") or {}).get("decision"))
        if name == "guarded":
            assert results[0]["envelope"]["error"]["code"] == "permission_denied"
            (record,) = executions.tool_calls(execution_id)
            assert record.approval is not None and record.approval["rule"] == "command.*"
            assert [e.data["decided_by"] for e in executions.events(execution_id)
                    if e.kind == "approval_decided"] == ["policy"]
    assert outcomes == {"guarded": (False, "deny"), "free": (True, None)}
    assert not (ws / "guarded.txt").exists() and (ws / "free.txt").read_text() == "ran\n"
