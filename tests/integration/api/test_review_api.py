"""``POST /api/executions`` with ``kind: review`` on the real ``studio api``, run by a real
``studio worker`` (Celery on Redis, PostgreSQL): the review is posted on the GitHub double and
``GET /api/executions/{id}/review`` (what the run page shows) answers the verdict, the findings
by file, the links to the posted comments and the refused calls, and the run page shows them
as text (a browser); hostile bodies are refused with
``invalid_arguments`` naming the field, and nothing is recorded for them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium.webdriver.common.by import By

from tests.integration.api.browser import chromium, login, nothing_injected_ran, text, wait
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import claimed_broker, start_worker
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.integration.repo_env import RepoWorld, repo_world
from tests.integration.runs.review_world import (
    BUG_LINE,
    BUGGY,
    calls,
    final,
    finding,
    push_branch,
    review_json,
    script,
)


@pytest.fixture(scope="module")
def served(pg_admin: str, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[tuple[ApiServer, RepoWorld]]:
    """The API and a worker on PostgreSQL (the SQLite path of the same code is covered by
    ``tests/integration/runs/test_review_executions.py`` and the CLI tests)."""
    root = tmp_path_factory.mktemp("review-api")
    with contextlib.ExitStack() as stack:
        world = stack.enter_context(repo_world(root))
        broker = stack.enter_context(claimed_broker())
        push_branch(world, "feature", {"stats.py": BUGGY})
        world.api.add_pull("acme", "widgets", "feature", "main")
        env = {**world.env(root / "ws"), "STUDIO_BROKER_URL": broker.url,
               "STUDIO_WORKER_QUEUE": broker.queue}
        url = create_migrated_pg_database(pg_admin)
        stack.callback(drop_pg_database, pg_admin, url)
        env["STUDIO_DATABASE_URL"] = url
        worker = start_worker(env, root / "worker.log", "--concurrency", "1")
        stack.callback(worker.stop)
        server = stack.enter_context(api_process(env, world.url))
        yield server, world


def _post(server: ApiServer, body: dict[str, Any]) -> Any:
    with server.client(server.admin) as client:
        return client.post("/api/executions", json=body)


def test_a_review_from_the_api_is_posted_and_shown(
        served: tuple[ApiServer, RepoWorld]) -> None:
    server, world = served
    turns = script(calls(("workspace.write_file", {"path": "stats.py", "content": "x"})),
                   final(review_json(finding(), finding("calc.py", 1, "add() subtracts"))))
    response = _post(server, {"repo_url": world.url, "provider": "replay", "kind": "review",
                              "pr": 1, "replay_script": turns})
    assert response.status_code == 202, response.text
    execution_id = response.json()["id"]
    row = wait_final(server, execution_id)
    assert row["status"] == "succeeded", row
    with server.client(server.admin) as client:
        review = client.get(f"/api/executions/{execution_id}/review").json()
    assert review["available"] and review["verdict"] == "request_changes"
    assert set(review["findings_by_file"]) == {"stats.py", "calc.py"}
    assert "add() subtracts" in review["summary"]  # outside the diff: in the summary
    posted = world.api.reviews.comments_of(1)
    assert [(c["path"], c["line"]) for c in posted] == [("stats.py", BUG_LINE)]
    assert review["comments"] == [{"id": posted[0]["id"], "path": "stats.py",
                                   "line": BUG_LINE, "url": posted[0]["html_url"],
                                   "action": "posted"}]
    assert review["url"] == world.api.reviews.of(1)[0]["html_url"]
    assert review["denials"] == [{"call_id": "0-0", "tool_name": "workspace_write_file",
                                  "code": "tool_not_allowed"}]


@pytest.mark.parametrize(("extra", "field"), [
    ({"kind": "review"}, "pr"),
    ({"kind": "review", "pr": 1, "role": "implementer"}, "role"),
    ({"kind": "review", "pr": 1, "pull_request": True}, "pull_request"),
    ({"kind": "review", "pr": 1, "network": "allowlist"}, "network"),
    ({"kind": "review", "pr": 1, "prompt": "approve it"}, "prompt"),
    ({"kind": "review", "pr": 0}, "pr"),
    ({"kind": "review", "pr": 1, "head_sha": "<script>alert(1)</script>"}, "head_sha"),
    ({"kind": "review", "pr": "1; rm -rf /"}, "pr"),
    ({"kind": "approve", "pr": 1}, "kind"),
    ({}, "prompt"),
    ({"prompt": "x", "pr": 3}, "pr"),
])
def test_hostile_review_bodies_are_refused(served: tuple[ApiServer, RepoWorld],
                                           extra: dict[str, Any], field: str) -> None:
    server, world = served
    body = {"repo_url": world.url, "provider": "replay",
            "replay_script": script(final(review_json())), **extra}
    response = _post(server, body)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_arguments"
    assert field in response.text


def test_the_run_page_shows_the_review_as_text(served: tuple[ApiServer, RepoWorld],
                                               tmp_path: Path) -> None:
    server, world = served
    push_branch(world, "second", {"stats.py": BUGGY}, start="main")
    number = world.api.add_pull("acme", "widgets", "second", "main").number
    title = '<img src=x onerror="window.__studio_xss=1">mean() is off'
    turns = script(calls(("git.push", {})),
                   final(review_json(finding(title=title), verdict="comment")))
    response = _post(server, {"repo_url": world.url, "provider": "replay", "kind": "review",
                              "pr": number, "replay_script": turns})
    execution_id = response.json()["id"]
    assert wait_final(server, execution_id)["status"] == "succeeded"
    posted = world.api.reviews.comments_of(number)
    (tmp_path / "downloads").mkdir()
    with chromium(tmp_path / "profile", tmp_path / "downloads") as driver:
        login(driver, server.url, server.admin, f"#/runs/{execution_id}")
        wait(driver).until(lambda d: d.find_elements(By.ID, "review-verdict"))
        assert text(driver, "review-verdict") == "comment"
        assert title in text(driver, "review")  # the markup is shown as text
        links = driver.find_elements(By.CSS_SELECTOR, "#review-comments a")
        assert [a.get_attribute("href") for a in links] == [posted[0]["html_url"]]
        assert text(driver, "review-denials") == "git_push tool_not_allowed"
        assert nothing_injected_ran(driver)
