"""A flowchart ``review`` node: one review execution of the pull request on the durable path,
its review posted; a review node's config is checked like any other (an out-of-range pull
request number, a role, a local path are ``invalid_config``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.db.executions import ExecutionRepository
from services.db.pr_reviews import PullRequestReviews
from services.flowcharts.graph import FlowchartGraph, FlowchartValidationError, validate_graph
from services.flowcharts.service import FlowchartRunService
from tests.integration.flowcharts.graphs import create, edges, node
from tests.integration.repo_env import repo_world
from tests.integration.runs.review_world import (
    BUG_LINE,
    BUGGY,
    final,
    finding,
    push_branch,
    review_json,
    script,
)


def test_a_review_node_posts_the_review(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        push_branch(world, "feature", {"stats.py": BUGGY})
        world.api.add_pull("acme", "widgets", "feature", "main")
        graph = {"nodes": [
            node("start", "start"),
            node("review", "review", provider="replay", repo_url=world.url, pr=1,
                 replay_script=script(final(review_json(finding())))),
            node("end", "end"),
        ], "edges": edges(("start", "review"), ("review", "end"))}
        db = world.database()
        settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws"})
        service = FlowchartRunService(db, settings)
        run = service.get(service.start(create(db, graph), workspace=str(tmp_path / "run")))
        assert run["status"] == "succeeded", run
        execution_id = run["nodes"]["review"]["execution_id"]
        row = ExecutionRepository(db).get(execution_id)
        assert row is not None and row.flowchart_run_id == run["id"]
        posted = PullRequestReviews(db).get(execution_id)
        assert posted is not None and posted.posted_url is not None
        assert [(c["path"], c["line"]) for c in world.api.reviews.comments_of(1)] == [
            ("stats.py", BUG_LINE)]
        db.dispose()


@pytest.mark.parametrize("config", [
    {"provider": "replay", "repo_url": "https://example.com/a/b", "pr": 0},
    {"provider": "replay", "repo_url": "https://example.com/a/b", "pr": 1, "role": "implementer"},
    {"provider": "replay", "repo_url": "/etc", "pr": 1},
    {"provider": "replay", "repo_url": "https://example.com/a/b", "pr": 1, "head_sha": "HEAD"},
])
def test_a_bad_review_node_config_is_refused(config: dict[str, object]) -> None:
    graph = FlowchartGraph.model_validate({"nodes": [
        node("start", "start"), {"id": "r", "type": "review", "config": config},
        node("end", "end")], "edges": edges(("start", "r"), ("r", "end"))})
    with pytest.raises(FlowchartValidationError) as raised:
        validate_graph(graph)
    assert [p.code for p in raised.value.problems] == ["invalid_config"]
