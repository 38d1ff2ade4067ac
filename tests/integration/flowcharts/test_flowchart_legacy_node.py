"""A flowchart agent node with ``__agent_runtime_cutover_enabled: false`` runs the legacy runtime
(the real agent CLI of each provider against the scripted model server) while the global setting
stays on:
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
from tests.support.model_script import Step, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

FIX = "sed -i 's/a - b/a + b/' calc.py"
TESTS = "python3 -m unittest -q"
# provider: (model, key variable, base-URL variable, URL suffix, the two tool calls, tool names)
CLIS: dict[str, tuple[str, str, str, str, list[Step], list[str]]] = {
    "claude": ("claude-sonnet-4-5", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "", [
        tool_calls([("Bash", {"command": FIX, "description": "fix"})]),
        tool_calls([("Bash", {"command": TESTS, "description": "tests"})])], ["Bash"] * 2),
    "codex": ("gpt-5.1", "OPENAI_API_KEY", "OPENAI_BASE_URL", "/v1", [
        tool_calls([("exec_command", {"cmd": FIX, "tty": False})]),
        tool_calls([("exec_command", {"cmd": TESTS, "tty": False})])],
        ["command_execution"] * 2),
    "gemini": ("gemini-2.5-pro", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "", [
        tool_calls([("run_shell_command", {"command": FIX})]),
        tool_calls([("run_shell_command", {"command": TESTS})])], ["run_shell_command"] * 2),
}


def _graph(repo_url: str, provider: str, model: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "fix", "type": "agent", "config": {
                "provider": provider, "model": model,
                "prompt": "Make the tests pass.", "repo_url": repo_url,
                "__agent_runtime_cutover_enabled": False}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"id": "a", "source": "start", "target": "fix"},
                  {"id": "b", "source": "fix", "target": "end"}],
    }


@pytest.mark.parametrize("provider", list(CLIS))
def test_the_node_override_selects_the_legacy_runtime(
        provider: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, key_env, url_env, suffix, calls, tool_names = CLIS[provider]
    steps = [*calls, text(json.dumps(DONE))]
    monkeypatch.setenv("STUDIO_WORKSPACE_DIR", str(tmp_path / "workspaces"))
    monkeypatch.setenv(key_env, "sk-node-override-KEY")
    with repo_world(tmp_path / "world") as world, ScriptedModelServer(steps) as server:
        monkeypatch.setenv(url_env, server.url + suffix)
        settings = world.settings()
        db = world.database()
        try:
            assert SettingsRepository(db).get("agent_runtime_cutover_enabled") is True
            graph = parse_graph(_graph(world.url, provider, model)).model_dump(
                mode="json", by_alias=True)
            flowchart_id = FlowchartRepository(db).create(name="legacy", graph=graph)
            service = FlowchartRunService(db, settings)
            run = service.get(service.start(flowchart_id))
            assert run["status"] == "succeeded", run
            execution_id = run["nodes"]["fix"]["execution_id"]
            repo = ExecutionRepository(db, settings_redactor())
            row = repo.get(execution_id)
            events = repo.events(execution_id)
        finally:
            db.dispose()
        assert len(server.requests) >= len(steps) and not server.unmatched
    assert row is not None and row.status == "succeeded" and row.runtime == "legacy"
    assert row.settings_snapshot["runtime"]["source"] == "node_override"
    tools = [e.data["envelope"]["tool_name"] for e in events if e.kind == "tool_result"]
    assert tools == tool_names
    assert row.branch is not None and "a + b" in (world.remote_file(row.branch, "calc.py") or "")
    assert len(world.pulls_of(row.branch)) == 1 and world.api.posts == 1
    assert TOKEN not in json.dumps([e.data for e in events])
