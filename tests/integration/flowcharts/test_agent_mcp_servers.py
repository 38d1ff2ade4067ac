"""MCP servers per agent node: two stored servers (the demo MCP servers of
``tests/support/mcp_servers.py`` over stdio and streamable HTTP), two nodes naming one each,
each node's model offered only its own server's tools (codex through the real SDK and the
scripted model server). A node naming a server that is not stored is refused at validation with
the node named; the servers' secrets stay out of every row and event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text as sql

from services.db.executions import ExecutionRepository, execution_to_json, tool_call_to_json
from services.db.mcp_servers import McpServerRepository
from services.db.models import McpServer
from services.db.session import Database
from services.execution.mcp.bridge import mcp_tool_name
from services.flowcharts.graph import FlowchartValidationError, parse_graph
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import create, edges, node
from tests.integration.mcp_fixtures import stdio_server_entry, workspace_server_entry
from tests.support.mcp_servers import DEMO_TOOLS
from tests.support.model_server import ScriptedModelServer, text, tool_calls
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

API_KEY = "sk-mcp-node-KEY-31c9aa"
ENV_SECRET = "mcp-env-SECRET-9f3b27c4d1"
HEADER_SECRET = "Bearer mcp-header-SECRET-52ae90"
DONE = json.dumps({"status": "success", "summary": "ok"})


@pytest.fixture
def keyed_settings(tmp_path: Path) -> StudioSettings:
    # the demo HTTP server listens on loopback: a stored server reaches it only when allowed
    return studio_settings(tmp_path / "data", secret_key="test-secret-key-for-mcp-servers",
                           repo_allowed_hosts=["127.0.0.1"])


def _graph(alpha: list[str], beta: list[str]) -> dict[str, Any]:
    return {"nodes": [
        node("start", "start"),
        node("first", "agent", provider="codex", model="gpt-5.1", prompt="Use your tools.",
             mcp_servers=alpha),
        node("second", "agent", provider="codex", model="gpt-5.1", prompt="Use yours.",
             mcp_servers=beta),
        node("end", "end"),
    ], "edges": edges(("start", "first"), ("first", "second"), ("second", "end"))}


def _names(server: ScriptedModelServer, index: int) -> set[str]:
    return {t.name for t in server.declared_tools(server.requests_for("openai")[index])}


def test_two_nodes_naming_different_servers_see_different_tools(
        db: Database, keyed_settings: StudioSettings, ws: Path, mcp_http_url: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    servers = McpServerRepository(db, keyed_settings)
    servers.create("alpha", workspace_server_entry(ws, env={"MCP_DEMO_FLAG": ENV_SECRET}))
    servers.create("beta", {"transport": "http", "url": mcp_http_url,
                            "headers": {"Authorization": HEADER_SECRET}})
    # the first node's model echoes the env secret through its server: the journal redacts it
    script = [tool_calls([("mcp__alpha__echo", {"text": ENV_SECRET})]), text(DONE), text(DONE)]
    with ScriptedModelServer(script) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
        service = FlowchartRunService(db, keyed_settings)
        run = service.get(service.start(create(db, _graph(["alpha"], ["beta"])),
                                        workspace=str(ws)))
        first, second = _names(server, 0), _names(server, 2)
    assert run["status"] == "succeeded", run
    alpha = {mcp_tool_name("alpha", t) for t in DEMO_TOOLS}
    beta = {mcp_tool_name("beta", t) for t in DEMO_TOOLS}
    assert alpha <= first and not beta & first
    assert beta <= second and not alpha & second
    assert "workspace_read_file" in first and "workspace_read_file" in second
    executions = ExecutionRepository(db, settings_redactor())
    first_id = run["nodes"]["first"]["execution_id"]
    calls = executions.tool_calls(first_id)
    assert [(c.tool_name, c.ok) for c in calls] == [("mcp__alpha__echo", True)]
    # no secret in any row or event of either execution, nor in the stored server's columns
    dumped = json.dumps([
        [execution_to_json(r) for r in executions.list(limit=10)],
        [tool_call_to_json(c) for c in calls],
        [[e.kind, e.data] for i in (first_id, run["nodes"]["second"]["execution_id"])
         for e in executions.events(i)],
        servers.list_servers(),
    ], default=str)
    assert ENV_SECRET not in dumped and "mcp-header-SECRET" not in dumped
    with db.session() as session:
        rows = [(r.name, r.config, r.secret_encrypted, repr(r))
                for r in session.query(McpServer).all()]
    assert len(rows) == 2
    for _, config, encrypted, shown in rows:
        assert encrypted is not None
        for secret in (ENV_SECRET.encode(), b"mcp-header-SECRET"):
            assert secret not in encrypted
        assert ENV_SECRET not in json.dumps(config) + shown
        assert "mcp-header-SECRET" not in json.dumps(config) + shown
    with db.engine.connect() as conn:  # the whole table as stored
        raw = json.dumps([list(r) for r in conn.execute(sql("SELECT * FROM mcp_servers"))],
                         default=str)
    assert ENV_SECRET not in raw and "mcp-header-SECRET" not in raw


def test_a_node_naming_an_unknown_server_is_refused_with_the_node_named(
        db: Database, keyed_settings: StudioSettings, ws: Path) -> None:
    McpServerRepository(db, keyed_settings).create("alpha", stdio_server_entry())
    flowchart_id = create(db, _graph(["alpha"], ["alpha", "gamma"]))
    service = FlowchartRunService(db, keyed_settings)
    with pytest.raises(FlowchartValidationError) as refused:
        service.start(flowchart_id, workspace=str(ws))
    assert [(p.code, p.node_id) for p in refused.value.problems] == [
        ("unknown_mcp_server", "second")]
    assert "'gamma'" in refused.value.problems[0].message
    assert service.list_runs(flowchart_id=flowchart_id) == []  # nothing half-started


@pytest.mark.parametrize(("names", "code"), [
    (["alpha", "alpha"], "duplicate_mcp_server"),
    (["not a name"], "invalid_mcp_servers"),
    ([f"s{i}" for i in range(21)], "invalid_mcp_servers"),
    (["x" * 5000], "invalid_mcp_servers"),
])
def test_hostile_server_lists_are_refused_at_parse_with_the_node_named(
        names: list[str], code: str) -> None:
    with pytest.raises(FlowchartValidationError) as refused:
        parse_graph(_graph([], names))
    problems = refused.value.to_json()
    assert [(p["code"], p["node_id"]) for p in problems] == [(code, "second")]
    assert "x" * 100 not in json.dumps(problems)  # a hostile value is not echoed whole
