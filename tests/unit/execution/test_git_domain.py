"""The git tool domain against real git: round trip, push rules, structured results, PRs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from tests.unit.execution.git_helpers import (
    AGENT_BRANCH,
    TOKEN,
    RecordingPullRequests,
    Repo,
    TokenAuth,
    call,
    context,
    error_code,
    executable,
    make_repo,
    ok,
    sh,
)


@pytest.fixture
def repo(workspace: Path) -> Repo:
    return make_repo(workspace)


def _commit_file(repo: Repo, name: str, text: str, message: str) -> dict[str, Any]:
    ctx = context(repo.ws)
    (repo.ws / name).parent.mkdir(parents=True, exist_ok=True)
    (repo.ws / name).write_text(text)
    ok(call(ctx, "add", paths=[name]))
    return ok(call(ctx, "commit", message=message))


def test_round_trip_branch_write_add_commit_push(repo: Repo) -> None:
    ctx = context(repo.ws)
    created = ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    assert created["branch"] == AGENT_BRANCH and created["checked_out"] is True
    (repo.ws / "src").mkdir()
    (repo.ws / "src" / "app.py").write_text("print('hello')\n")
    added = ok(call(ctx, "add"))
    assert added["staged"] == ["src/app.py"]
    committed = ok(call(ctx, "commit", message="Add app\n\nWith a body."))
    assert committed["files"] == ["src/app.py"] and committed["subject"] == "Add app"
    pushed = ok(call(ctx, "push"))
    assert pushed["branch"] == AGENT_BRANCH and pushed["sha"] == committed["sha"]

    top = repo.remote_log(AGENT_BRANCH)[0].split("\t")
    # The execution's identity, not the repository's user.name / user.email.
    assert top == [committed["sha"], "Studio Agent", "agent@studio.invalid", "Add app"]
    status = ok(call(ctx, "status"))
    assert status["upstream"] == f"origin/{AGENT_BRANCH}"
    assert (status["ahead"], status["behind"], status["clean"]) == (0, 0, True)


def test_commit_with_nothing_staged_is_nothing_to_commit(repo: Repo) -> None:
    ctx = context(repo.ws)
    assert error_code(call(ctx, "commit", message="empty")) == "nothing_to_commit"
    (repo.ws / "README.md").write_text("changed but not staged\n")
    assert error_code(call(ctx, "commit", message="empty")) == "nothing_to_commit"
    committed = ok(call(ctx, "commit", message="marker", allow_empty=True))
    assert committed["files"] == [] and len(committed["sha"]) == 40
    assert ok(call(ctx, "commit", message="all", all=True))["files"] == ["README.md"]


@pytest.mark.parametrize("default_branch", [None, "main"])
def test_push_to_default_branch_is_protected(repo: Repo, default_branch: str | None) -> None:
    # ctx.branch None: the current branch (main) would be pushed; main is the default branch,
    # known from ctx.default_branch or else from origin/HEAD.
    ctx = context(repo.ws, branch=None, default_branch=default_branch)
    _commit_file(repo, "x.txt", "x\n", "local change on main")
    before = repo.remote_log("main")
    assert error_code(call(ctx, "push")) == "protected_branch"
    assert error_code(call(ctx, "push", branch="main")) == "protected_branch"
    assert repo.remote_log("main") == before


def test_push_of_the_default_branch_named_as_ctx_branch_is_protected(repo: Repo) -> None:
    ctx = context(repo.ws, branch="main")
    _commit_file(repo, "x.txt", "x\n", "local change on main")
    assert error_code(call(ctx, "push")) == "protected_branch"


def test_fallback_protects_main_and_master_without_origin_head(repo: Repo) -> None:
    sh(repo.ws, "remote", "set-head", "origin", "--delete")
    ctx = context(repo.ws, branch=None)
    ok(call(ctx, "create_branch", name="master"))
    assert error_code(call(ctx, "push")) == "protected_branch"


@pytest.mark.parametrize(
    "branch",
    [f"+{AGENT_BRANCH}", f"{AGENT_BRANCH}:main", f"+{AGENT_BRANCH}:main", "HEAD:main", ":main"],
)
def test_forced_and_refspec_pushes_are_protected(repo: Repo, branch: str) -> None:
    ctx = context(repo.ws)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    _commit_file(repo, "x.txt", "x\n", "work")
    before = repo.remote_log("main")
    assert error_code(call(ctx, "push", branch=branch)) == "protected_branch"
    assert repo.remote_log("main") == before
    assert not repo.remote_has(f"refs/heads/{AGENT_BRANCH}")


def test_push_of_another_branch_than_ctx_branch_is_protected(repo: Repo) -> None:
    ctx = context(repo.ws)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    ok(call(ctx, "create_branch", name="someone-else"))
    _commit_file(repo, "x.txt", "x\n", "work")
    envelope = call(ctx, "push", branch="someone-else")
    assert error_code(envelope) == "protected_branch"
    assert envelope["error"]["details"]["allowed"] == AGENT_BRANCH
    assert not repo.remote_has("refs/heads/someone-else")


def test_push_with_detached_head_and_no_ctx_branch_is_protected(repo: Repo) -> None:
    ctx = context(repo.ws, branch=None)
    head = ok(call(ctx, "current_branch"))["head"]
    detached = ok(call(ctx, "checkout", ref=head))
    assert detached["detached"] is True and detached["branch"] is None
    assert error_code(call(ctx, "push")) == "protected_branch"


def test_non_fast_forward_push_is_push_rejected(repo: Repo) -> None:
    ctx = context(repo.ws)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    _commit_file(repo, "a.txt", "a\n", "first")
    ok(call(ctx, "push"))
    other = repo.ws.parent / "other"
    sh(repo.ws.parent, "clone", "--quiet", "-b", AGENT_BRANCH, str(repo.bare), str(other))
    (other / "b.txt").write_text("b\n")
    sh(other, "add", "b.txt")
    sh(other, "commit", "--quiet", "-m", "someone else")
    sh(other, "push", "--quiet", "origin", AGENT_BRANCH)
    _commit_file(repo, "c.txt", "c\n", "diverged")
    assert error_code(call(ctx, "push")) == "push_rejected"
    assert "someone else" in repo.remote_log(AGENT_BRANCH)[0]


def test_status_is_structured(repo: Repo) -> None:
    ctx = context(repo.ws)
    _commit_file(repo, "tracked.txt", "one\n", "local commit")
    (repo.ws / "README.md").write_text("modified\n")
    (repo.ws / "new.txt").write_text("untracked\n")
    (repo.ws / "staged.txt").write_text("staged\n")
    sh(repo.ws, "add", "staged.txt")
    sh(repo.ws, "mv", "tracked.txt", "moved name.txt")
    status = ok(call(ctx, "status"))
    assert (status["branch"], status["upstream"]) == ("main", "origin/main")
    assert (status["ahead"], status["behind"], status["detached"]) == (1, 0, False)
    entries = {e["path"]: e for e in status["entries"]}
    assert entries["README.md"] | {} == {"path": "README.md", "index": ".", "worktree": "M",
                                         "kind": "changed"}
    assert (entries["staged.txt"]["index"], entries["staged.txt"]["kind"]) == ("A", "changed")
    assert entries["new.txt"]["kind"] == "untracked"
    assert entries["moved name.txt"]["kind"] == "renamed"
    assert entries["moved name.txt"]["orig_path"] == "tracked.txt"


def test_diff_is_structured_and_capped(repo: Repo) -> None:
    ctx = context(repo.ws)
    (repo.ws / "README.md").write_text("# demo\nline 2\nline 3\n")
    result = ok(call(ctx, "diff"))
    assert result["files"] == [{"path": "README.md", "status": "modified", "additions": 2,
                                "deletions": 1, "binary": False}]
    assert "+line 3" in result["patch"] and result["truncated"] is False
    assert ok(call(ctx, "diff", staged=True))["files"] == []
    sh(repo.ws, "add", "README.md")
    assert ok(call(ctx, "diff", staged=True))["files"][0]["path"] == "README.md"
    assert ok(call(ctx, "diff", ref="HEAD", paths=["other.txt"]))["files"] == []

    small = context(repo.ws, output_cap_bytes=40)
    capped = ok(call(small, "diff", ref="HEAD"))
    assert capped["truncated"] is True and "+line 3" not in capped["patch"]


def test_log_and_show_are_structured(repo: Repo) -> None:
    ctx = context(repo.ws)
    first = sh(repo.ws, "rev-parse", "HEAD").strip()
    second = _commit_file(repo, "docs/a.md", "a\nb\n", "Add docs\n\nLonger body.")
    commits = ok(call(ctx, "log"))["commits"]
    assert [c["sha"] for c in commits] == [second["sha"], first]
    top = commits[0]
    assert top["parents"] == [first] and top["subject"] == "Add docs"
    assert (top["author_name"], top["author_email"]) == ("Studio Agent", "agent@studio.invalid")
    assert top["date"][:2] == "20"
    assert ok(call(ctx, "log", max_count=1))["commits"] == [top]
    assert [c["sha"] for c in ok(call(ctx, "log", ref="origin/main..HEAD"))["commits"]] == [
        second["sha"]]

    shown = ok(call(ctx, "show", ref="HEAD"))
    assert shown["sha"] == second["sha"] and shown["message"] == "Add docs\n\nLonger body."
    assert shown["files"] == [{"path": "docs/a.md", "status": "added", "additions": 2,
                               "deletions": 0, "binary": False}]
    assert "+b" in shown["patch"]
    assert error_code(call(ctx, "show", ref="no-such-ref")) == "git_error"


def test_branches(repo: Repo) -> None:
    ctx = context(repo.ws)
    assert ok(call(ctx, "current_branch")) == {
        "branch": "main", "detached": False, "head": sh(repo.ws, "rev-parse", "HEAD").strip()}
    ok(call(ctx, "create_branch", name="feature", checkout=False))
    listing = ok(call(ctx, "list_branches"))
    names = {(b["name"], b["remote"], b["current"]) for b in listing["branches"]}
    assert names == {("main", False, True), ("feature", False, False), ("origin/main", True, False)}
    assert listing["current"] == "main"
    assert ok(call(ctx, "checkout", ref="feature"))["branch"] == "feature"
    assert error_code(call(ctx, "create_branch", name="feature")) == "git_error"


def test_workflow_changes_are_refused_unless_allowed(repo: Repo) -> None:
    ctx = context(repo.ws)
    executable(repo.ws / ".github" / "workflows" / "ci.yml", "on: push\n")
    assert error_code(call(ctx, "add", paths=[".github/workflows/ci.yml"])) == "protected_path"
    ok(call(ctx, "add"))  # "." stages everything, workflows included ...
    envelope = call(ctx, "commit", message="sneak a workflow in")
    assert error_code(envelope) == "protected_path"  # ... but the commit refuses them
    assert envelope["error"]["details"]["paths"] == [".github/workflows/ci.yml"]
    allowed = context(repo.ws, allow_workflow_changes=True)
    assert ok(call(allowed, "commit", message="allowed"))["files"] == [".github/workflows/ci.yml"]


def test_restore_discards_changes(repo: Repo) -> None:
    ctx = context(repo.ws)
    (repo.ws / "README.md").write_text("scribble\n")
    sh(repo.ws, "add", "README.md")
    assert ok(call(ctx, "restore", paths=["README.md"]))["restored"] == ["README.md"]
    assert (repo.ws / "README.md").read_text() == "# demo\nline two\n"
    assert ok(call(ctx, "status"))["clean"] is True


def test_fetch(repo: Repo) -> None:
    other = repo.ws.parent / "other"
    sh(repo.ws.parent, "clone", "--quiet", str(repo.bare), str(other))
    sh(other, "commit", "--quiet", "--allow-empty", "-m", "upstream work")
    sh(other, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    ctx = context(repo.ws)
    fetched = ok(call(ctx, "fetch", ref="main"))
    assert fetched["fetch_head"] == sh(other, "rev-parse", "HEAD").strip()
    assert ok(call(ctx, "status"))["behind"] == 1


def test_create_pull_request_delegates_to_the_port(repo: Repo) -> None:
    port = RecordingPullRequests()
    ctx = context(repo.ws, pull_requests=port)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    result = ok(call(ctx, "create_pull_request", title="T", body="B", base="main", draft=True))
    assert port.calls == [{"execution_id": "exec-1", "workspace": repo.ws.resolve(),
                           "head_branch": AGENT_BRANCH, "base_branch": "main", "title": "T",
                           "body": "B", "draft": True}]
    assert (result["number"], result["url"], result["created"]) == (
        7, "https://example.invalid/pr/7", True)
    ok(call(ctx, "checkout", ref="main"))
    assert error_code(call(ctx, "create_pull_request", title="T", body="B")) == "protected_branch"
    assert len(port.calls) == 1


def test_create_pull_request_without_integration(repo: Repo) -> None:
    ctx = context(repo.ws)
    envelope = call(ctx, "create_pull_request", title="T", body="B")
    assert error_code(envelope) == "integration_unavailable"


def test_token_never_reaches_the_envelope(repo: Repo) -> None:
    # The remote (server side) answers with an error that echoes the credential, as some
    # servers and proxies do; the envelope must not carry it, raw or base64-encoded.
    basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    executable(repo.bare / "hooks" / "pre-receive",
               f"#!/bin/sh\necho 'bad credential {TOKEN} / Authorization: Basic {basic}' >&2\n"
               "exit 1\n")
    auth = TokenAuth()
    ctx = context(repo.ws, git_auth=auth)
    ok(call(ctx, "create_branch", name=AGENT_BRANCH))
    _commit_file(repo, "a.txt", "a\n", "work")
    envelope = call(ctx, "push")
    assert error_code(envelope) == "push_rejected"
    text = json.dumps(envelope)
    assert "bad credential" in text  # the server's message is there ...
    assert TOKEN not in text and basic not in text  # ... without the secret
    assert auth.urls == [str(repo.bare)]
