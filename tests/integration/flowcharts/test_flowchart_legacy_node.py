"""A flowchart agent node with ``__agent_runtime_cutover_enabled: false`` runs the legacy runtime
(the real Claude Code CLI against the scripted model server) while the global setting stays on:
clone, the CLI's edit and test run, the harness's push and one pull request; the execution
records ``legacy`` with the source ``node_override``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.db.runtime_settings import SettingsRepository
from services.flowcharts.graph import parse_graph
from services.flowcharts.service import FlowchartRunService
from tests.integration.repo_env import DONE, TOKEN, repo_world
from tests.support.model_script import text, tool_calls
from tests.support.model_server import ScriptedModelServer

STEPS = [
    tool_calls([("Read", {"file_path": "calc.py"})]),
    tool_calls([("Edit", {"file_path": "calc.py", "old_string": "a - b", "new_string": "a + b"})]),
    tool_calls([("Bash", {"command": "python3 -m unittest -q", "description": "tests"})]),
    text(json.dumps(DONE)),
]


def _graph(repo_url: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "fix", "type": "agent", "config": {
                "provider": "claude", "model": "claude-sonnet-4-5",
                "prompt": "Make the tests pass.", "repo_url": repo_url,
                "__agent_runtime_cutover_enabled": False}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"id": "a", "source": "start", "target": "fix"},
                  {"id": "b", "source": "fix", "target": "end"}],
    }


def test_the_node_override_selects_the_legacy_runtime(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_WORKSPACE_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-node-override-KEY")
    with repo_world(tmp_path / "world") as world, ScriptedModelServer(STEPS) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        settings = world.settings()
        db = world.database()
        try:
            assert SettingsRepository(db).get("agent_runtime_cutover_enabled") is True
            graph = parse_graph(_graph(world.url)).model_dump(mode="json", by_alias=True)
            flowchart_id = FlowchartRepository(db).create(name="legacy", graph=graph)
            service = FlowchartRunService(db, settings)
            run = service.get(service.start(flowchart_id))
            assert run["status"] == "succeeded", run
            execution_id = run["nodes"]["fix"]["execution_id"]
            repo = ExecutionRepository(db)
            row = repo.get(execution_id)
            events = repo.events(execution_id)
        finally:
            db.dispose()
        assert len(server.requests_for("anthropic")) == len(STEPS)
    assert row is not None and row.status == "succeeded" and row.runtime == "legacy"
    assert row.settings_snapshot["runtime"]["source"] == "node_override"
    tools = [e.data["envelope"]["tool_name"] for e in events if e.kind == "tool_result"]
    assert tools == ["Read", "Edit", "Bash"]
    assert row.branch is not None and "a + b" in (world.remote_file(row.branch, "calc.py") or "")
    assert len(world.pulls_of(row.branch)) == 1 and world.api.posts == 1
    assert TOKEN not in json.dumps([e.data for e in events])
