"""Review executions on the durable path (issue 31): a pull request with a planted bug gets one
GitHub review with an inline comment on the right line; a later push updates or resolves that
comment and never duplicates it; a finding outside the diff moves into the summary; the
reviewer's write, commit and push calls are refused with ``tool_not_allowed`` and the pull
request's branch is unchanged; a malformed review gets one repair turn, then ``review_invalid``.
Each runs on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.pr_reviews import PullRequestReviews
from services.db.session import Database
from services.runs.review_start import start_review
from services.runs.service import ExecutionService
from services.settings import StudioSettings
from tests.integration.repo_env import RepoWorld, repo_world
from tests.integration.runs.review_world import (
    BUG_LINE,
    BUGGY,
    FIXED,
    calls,
    final,
    finding,
    push_branch,
    review_json,
    script,
)


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with repo_world(tmp_path) as world:
        yield world


def _settings(world: RepoWorld, tmp_path: Path) -> StudioSettings:
    return world.settings().model_copy(update={"workspace_dir": tmp_path / "workspaces"})


def _review(db: Database, settings: StudioSettings, world: RepoWorld, turns: dict[str, Any],
            pr: int = 1) -> str:
    execution_id = start_review(db, settings, world.url, pr, provider="replay", script=turns)
    ExecutionService(db, settings).execute_recorded(execution_id)
    return execution_id


def test_a_planted_bug_is_commented_once_then_updated_then_resolved(
        db: Database, world: RepoWorld, tmp_path: Path) -> None:
    settings = _settings(world, tmp_path)
    head = push_branch(world, "feature", {"stats.py": BUGGY})
    world.api.add_pull("acme", "widgets", "feature", "main")
    first = _review(db, settings, world, script(
        calls(("workspace.read_file", {"path": "stats.py"}),
              ("workspace.write_file", {"path": "stats.py", "content": "x"}),
              ("git.commit", {"message": "sneaky"}), ("git.push", {})),
        final(review_json(finding(), finding("calc.py", 2, "add() subtracts")))))
    row = ExecutionRepository(db).get(first)
    assert row is not None and row.status == "succeeded", (row.error_code, row.error_message)
    reviews, comments = world.api.reviews.of(1), world.api.reviews.comments_of(1)
    assert len(reviews) == 1 and reviews[0]["state"] == "CHANGES_REQUESTED"
    assert reviews[0]["commit_id"] == head
    # the inline comment is on the planted bug; the finding outside the diff is in the summary
    assert [(c["path"], c["line"]) for c in comments] == [("stats.py", BUG_LINE)]
    assert "<!-- studio-finding: " in comments[0]["body"]
    assert "calc.py:2" in reviews[0]["body"] and "add() subtracts" in reviews[0]["body"]
    # the write, commit and push were refused; the pull request's branch did not move
    refused = {(c.tool_name, c.error_code)
               for c in ExecutionRepository(db).tool_calls(first) if not c.ok}
    assert refused == {("workspace_write_file", "tool_not_allowed"),
                       ("git_commit", "tool_not_allowed"), ("git_push", "tool_not_allowed")}
    assert world.api.branch_sha("acme", "widgets", "feature") == head
    assert not world.host.pushes_of("feature") and not world.host.pushes_of(row.branch or "-")
    assert world.remote_file("feature", "stats.py") == BUGGY

    # a push that leaves the bug: incremental review, the comment updated, not duplicated
    second_head = push_branch(world, "feature", {"notes.txt": "more\n"})
    second = _review(db, settings, world, script(final(review_json(finding()))))
    task = _task(db, second)
    assert "incremental review" in task and "notes.txt" in task and "+    return sum" not in task
    comments = world.api.reviews.comments_of(1)
    assert len(world.api.reviews.of(1)) == 2 and len(comments) == 1
    assert "Still present at " + second_head[:12] in comments[0]["body"]

    # the fix: the earlier comment is marked resolved, still one comment
    push_branch(world, "feature", {"stats.py": FIXED})
    third = _review(db, settings, world, script(final(review_json(verdict="comment"))))
    comments = world.api.reviews.comments_of(1)
    assert len(comments) == 1 and comments[0]["body"].startswith("**Resolved**")
    posted = PullRequestReviews(db).get(third)
    assert posted is not None and posted.verdict == "comment"
    assert posted.comments == [{"id": comments[0]["id"], "path": "stats.py", "line": BUG_LINE,
                                "url": comments[0]["html_url"], "action": "resolved"}]


def _task(db: Database, execution_id: str) -> str:
    events = ExecutionRepository(db).events(execution_id)
    return next(str(e.data["task"]) for e in events if e.kind == "started")


def test_a_malformed_review_gets_one_repair_turn_then_review_invalid(
        db: Database, world: RepoWorld, tmp_path: Path) -> None:
    settings = _settings(world, tmp_path)
    push_branch(world, "feature", {"stats.py": BUGGY})
    world.api.add_pull("acme", "widgets", "feature", "main")
    repaired = _review(db, settings, world, script(
        final("looks fine to me"), final(review_json(finding()))))
    row = ExecutionRepository(db).get(repaired)
    assert row is not None and row.status == "succeeded", row.error_message
    assert len(world.api.reviews.of(1)) == 1
    approve = review_json(verdict="approve")  # not allowed by this deployment
    failed = _review(db, settings, world, script(final("{}"), final(approve)))
    row = ExecutionRepository(db).get(failed)
    assert row is not None and (row.status, row.error_code) == ("failed", "review_invalid")
    assert "approve" in (row.error_message or "")
    assert len(world.api.reviews.of(1)) == 1  # nothing posted
