"""A flowchart whose node's execution is dead-lettered waits (in process, on SQLite and
PostgreSQL): GitHub answers 503 at pull-request time (an infrastructure error) until the one
attempt ``retry_max_attempts`` allows is spent, so the node's execution is ``dead_lettered``; the
node stays running and the run neither failed nor finished (the next node not started), also
when its task is delivered again or its runner ends. An operator's ``retry`` dispatches the node
again, once, through its node task: the execution resumes (the loop is not run again, only the
finalization), opens its pull request and the run goes on to its end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database, open_database
from services.flowcharts.graph import parse_graph
from services.flowcharts.service import FlowchartRunService
from services.runs.retries import redrive
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, edges, final, node
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.support.settings import studio_settings

SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "workspace.edit_file",
                     "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
    {"final": DONE},
]}
Sent = list[tuple[str, str]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        yield world


@pytest.fixture
def database(world: RepoWorld, db_url: str) -> Iterator[tuple[Database, StudioSettings]]:
    settings = studio_settings(world.root / "data", database_url=db_url, github_token=TOKEN,
                               github_api_url=world.api.api_url,
                               github_git_origins=[world.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"],
                               workspace_dir=world.root / "workspaces")
    db = open_database(settings)
    SettingsRepository(db).set("retry_max_attempts", 1)
    yield db, settings
    db.dispose()


def test_a_dead_lettered_node_waits_until_it_is_retried(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    sent: Sent = []
    service = FlowchartRunService(db, settings, dispatch=lambda r, n: sent.append((r, n)))
    graph = {"nodes": [
        node("start", "start"),
        node("fix", "agent", **agent("Fix add", SCRIPT, repo_url=world.url)),
        node("after", "agent", **agent("Report", final("success", "reported"))),
        node("end", "end")],
        "edges": edges(("start", "fix"), ("fix", "after"), ("after", "end"))}
    stored = parse_graph(graph).model_dump(mode="json")
    run_id = service.start(FlowchartRepository(db).create(name="outage", graph=stored))
    world.api.fail_next.extend([503] * 40)  # GitHub down at pull-request time

    service.run_node(run_id, "fix")
    run = service.get(run_id)
    fix = run["nodes"]["fix"]
    execution_id = fix["execution_id"]
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "dead_lettered", (row.status if row else None)
    assert [e["code"] for e in row.attempt_errors or []] == ["integration_unavailable"]
    assert (run["status"], fix["state"], run["nodes"]["after"]["state"]) == (
        "running", "running", "pending")
    service.run_node(run_id, "fix")  # delivered again: it keeps waiting, no new attempt
    service.fail_unfinished(run_id, "fix", "its child ended")
    again = ExecutionRepository(db).get(execution_id)
    assert again is not None and (again.status, again.lease_epoch) == ("dead_lettered", 1)
    assert service.get(run_id)["nodes"]["fix"]["state"] == "running"
    assert sent == [(run_id, "fix")]

    world.api.fail_next.clear()  # GitHub is back
    standalone: list[str] = []
    redrive(db, execution_id, "ops", standalone.append, lambda r, n: sent.append((r, n)))
    assert standalone == [] and sent == [(run_id, "fix")] * 2
    for index in range(1, 10):
        if index >= len(sent):
            break
        service.run_node(*sent[index])
    done = service.get(run_id)
    assert done["status"] == "succeeded", done
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "succeeded" and row.pr_url is not None
    assert len(world.pulls_of(row.branch or "")) == 1
    kinds = [e.kind for e in ExecutionRepository(db).events(execution_id)]
    assert kinds.count("started") == 1  # the loop ran once: the retry only finalized
