"""Finalization rules through ``execute_execution`` (replay provider, in process): --no-pr,
workflow changes refused, a missing base branch reported, and the journal always ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.support.redaction import settings_redactor


def _run(world: RepoWorld, tmp_path: Path, writes: dict[str, str],
         extra: list[dict[str, Any]] | None = None, **request: Any) -> Any:
    turns = [{"tool_calls": [{"tool": "workspace.write_file",
                              "args": {"path": path, "content": content}}]}
             for path, content in writes.items()]
    turns += [{"tool_calls": [call]} for call in extra or []]
    db = world.database()
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Change things", repo_url=world.url,
            script={"turns": [*turns, {"final": DONE}]}, **request), Redactor([TOKEN]),
            settings=world.settings())
        settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws"})
        outcome = execute_execution(execution_id, settings=settings, db=db)
        return outcome, ExecutionRepository(db).get(execution_id), [
            (e.kind, e.data) for e in ExecutionRepository(db,
                                                          settings_redactor()).events(execution_id)]
    finally:
        db.dispose()


def test_no_pr_pushes_the_branch_only(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        outcome, row, _ = _run(world, tmp_path, {"new.txt": "hello\n"}, pull_request=False)
        assert outcome.status == "succeeded" and row.pr_url is None
        assert world.remote_file(row.branch, "new.txt") == "hello\n"
        assert world.api.branch_sha("acme", "widgets", row.branch) == row.head_sha
        assert world.api.pulls == [] and world.api.posts == 0
        assert list((tmp_path / "ws").iterdir()) == []  # the workspace was cleaned up


def test_workflow_changes_are_refused_by_the_finalizer(tmp_path: Path) -> None:
    # the workspace domain refuses such writes; a command can still make one
    make = {"tool": "command.run", "args": {"argv": [
        "sh", "-c", "mkdir -p .github/workflows && echo 'on: push' > .github/workflows/ci.yml"]}}
    with repo_world(tmp_path) as world:
        outcome, row, _ = _run(world, tmp_path, {"ci.txt": "x\n"}, extra=[make])
        assert outcome.status == "failed" and row.error_code == "protected_path"
        assert world.host.pushes == [] and world.api.pulls == []


def test_missing_base_branch_fails_and_the_journal_ends(tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        outcome, row, events = _run(world, tmp_path, {"x.txt": "x\n"}, base_branch="nope")
        assert outcome.status == "failed" and row.status == "failed"
        assert row.error_code == "git_error"
        assert [kind for kind, _ in events] == ["finished"]
        assert events[0][1]["error"]["code"] == "git_error"
        assert world.host.pushes == []


def test_a_transient_github_failure_is_retried_without_a_second_push_or_pr(
        tmp_path: Path) -> None:
    with repo_world(tmp_path) as world:
        # the first finalization dies on GitHub's 502 after the push; the retry finds the
        # branch already pushed and opens the one pull request
        world.api.fail_next.extend([502])
        outcome, row, events = _run(world, tmp_path, {"new.txt": "hello\n"})
        assert outcome.status == "succeeded", row.error_message
        assert len(world.host.pushes_of(row.branch)) == 1
        assert world.api.posts == 1 and row.pr_url is not None
        steps = [(d["step"], d["ok"], d.get("pushed"), (d.get("error") or {}).get("code"))
                 for kind, d in events if kind == "finalize"]
        assert steps == [("commit", True, None, None), ("push", True, True, None),
                         ("pull_request", False, None, "integration_unavailable"),
                         ("commit", True, None, None), ("push", True, False, None),
                         ("pull_request", True, None, None)]
        assert events[-1][1]["url"] == row.pr_url


def test_a_lasting_github_failure_queues_a_retry_after_finalizations_own_tries(
        tmp_path: Path) -> None:
    """GitHub answering 502 past finalization's own tries is an infrastructure error: the
    execution is queued again with ``retry_at`` (issue 32), having pushed once."""
    with repo_world(tmp_path) as world:
        world.api.fail_next.extend([502] * 10)
        outcome, row, events = _run(world, tmp_path, {"new.txt": "hello\n"})
        finalize = [data for kind, data in events if kind == "finalize"][-1]
        assert finalize["step"] == "pull_request" and finalize["ok"] is False
        assert finalize["error"]["code"] == "integration_unavailable"
        assert events[-1][0] == "retry"
        assert outcome.status == "queued" and row.retry_at is not None
        assert row.last_error is not None and row.last_error["code"] == "integration_unavailable"
        assert len(world.host.pushes_of(row.branch)) == 1 and world.api.posts == 0


RESTORE = {"tool": "command.run", "args": {"argv": [
    "sh", "-c", "printf 'def add(a, b):\\n    return a - b\\n' > calc.py"]}}
EDIT = {"tool": "workspace.edit_file",
        "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}


def test_claimed_changes_with_nothing_to_commit_fail_as_workspace_lost(tmp_path: Path) -> None:
    """The edit is gone from the worktree when finalization looks (here undone behind the
    journal's back): not ``succeeded`` without a push, but ``workspace_lost`` with the evidence."""
    with repo_world(tmp_path) as world:
        outcome, row, events = _run(world, tmp_path, {}, extra=[EDIT, RESTORE])
        assert outcome.status == "failed" and row.status == "failed"
        assert row.error_code == "workspace_lost"
        assert "workspace.edit_file" in row.error_message
        assert "the result lists 1 change(s)" in row.error_message
        assert row.head_sha is None and row.pr_url is None
        assert world.host.pushes == [] and world.api.pulls == []
        assert [kind for kind, _ in events].count("finished") == 1


def test_a_run_that_changes_and_claims_nothing_succeeds_without_a_push(tmp_path: Path) -> None:
    look = {"tool": "workspace.read_file", "args": {"path": "calc.py"}}
    with repo_world(tmp_path) as world:
        db = world.database()
        try:
            execution_id = create_execution(db, ExecutionRequest(
                provider="replay", prompt="Look only", repo_url=world.url, script={"turns": [
                    {"tool_calls": [look]}, {"final": {**DONE, "changes": []}}]}),
                Redactor([TOKEN]), settings=world.settings())
            settings = world.settings().model_copy(update={"workspace_dir": tmp_path / "ws"})
            outcome = execute_execution(execution_id, settings=settings, db=db)
            row = ExecutionRepository(db).get(execution_id)
        finally:
            db.dispose()
        assert outcome.status == "succeeded" and row is not None and row.head_sha is None
        assert world.host.pushes == [] and world.api.pulls == []
