"""An agent node that names a repository runs the durable path: clone, its own branch, the
agent's fix, push and pull request, linked to the flowchart run (SQLite, in process)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.flowcharts.graph import FlowchartValidationError, parse_graph, validate_graph
from services.flowcharts.service import FlowchartRunService
from tests.integration.repo_env import DONE, TEST_ARGV, repo_world
from tests.support.redaction import settings_redactor

FIX = {"turns": [
    {"tool_calls": [{"tool": "workspace.edit_file", "args": {
        "path": "calc.py", "old_text": "return a - b", "new_text": "return a + b"}}]},
    {"tool_calls": [{"tool": "command.run", "args": {"argv": TEST_ARGV}}]},
    {"final": DONE},
]}


def _graph(repo_url: str) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "fix", "type": "agent", "config": {
                "provider": "replay", "prompt": "Make the tests pass.", "replay_script": FIX,
                "repo_url": repo_url}},
            {"id": "end", "type": "end", "config": {}},
        ],
        "edges": [{"id": "a", "source": "start", "target": "fix"},
                  {"id": "b", "source": "fix", "target": "end"}],
    }


def test_a_repository_node_ends_in_a_pushed_branch_and_one_pull_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_WORKSPACE_DIR", str(tmp_path / "workspaces"))
    with repo_world(tmp_path / "world") as world:
        settings = world.settings()
        db = world.database()
        try:
            graph = parse_graph(_graph(world.url)).model_dump(mode="json")
            flowchart_id = FlowchartRepository(db).create(name="repo", graph=graph)
            service = FlowchartRunService(db, settings)
            run = service.get(service.start(flowchart_id))
            assert run["status"] == "succeeded", run
            row = ExecutionRepository(db,
                                      settings_redactor()).get(run["nodes"]["fix"]["execution_id"])
            assert row is not None and row.status == "succeeded"
            assert row.flowchart_run_id == run["id"] and row.branch is not None
        finally:
            db.dispose()
        assert "a + b" in (world.remote_file(row.branch, "calc.py") or "")
        pulls = world.pulls_of(row.branch)
        assert len(pulls) == 1 and world.api.posts == 1
        assert row.pr_url is not None and row.pr_url.endswith(f"/pull/{pulls[0].number}")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ext::sh -c touch% /tmp/x",
                                 "/srv/local/repo", "--upload-pack=evil"])
def test_a_repository_node_refuses_urls_the_api_refuses(url: str) -> None:
    with pytest.raises(FlowchartValidationError) as info:
        validate_graph(parse_graph(_graph(url)))
    assert any(problem.node_id == "fix" for problem in info.value.problems)
