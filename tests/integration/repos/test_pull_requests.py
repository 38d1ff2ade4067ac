"""The pull-request port through the real PyGithub over HTTP against the local GitHub API, and the
keyed wrapper that never opens a second pull request for one execution."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import PullRequestRef
from services.repos.pull_requests import (
    GitHubPullRequests,
    InMemoryPullRequestLedger,
    KeyedPullRequestPort,
    execution_marker,
)
from tests.support.git_http_server import seed_bare_repo
from tests.support.github_api import GitHubApi, github_api

TOKEN = "ghs_ApiToken0123456789abcdefABCDEF"
HEAD = "studio/exec-7-fix"


@dataclass
class Env:
    api: GitHubApi
    port: GitHubPullRequests


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    root = tmp_path / "git"
    seed_bare_repo(root, "acme/widgets", {"a.txt": "a\n"}, extra_branches=(HEAD, "other"))
    with github_api(root, TOKEN) as api:
        port = GitHubPullRequests(api.api_url, TOKEN, "acme", "widgets",
                                  seconds_between_requests=0, seconds_between_writes=0)
        yield Env(api, port)
        port.close()


def open_pr(port: GitHubPullRequests | KeyedPullRequestPort, *, execution_id: str = "exec-7",
            head: str = HEAD, base: str | None = "main") -> PullRequestRef:
    return port.create_or_reuse(execution_id=execution_id, workspace=Path("/nonexistent"),
                                head_branch=head, base_branch=base, title="Fix the counter",
                                body="Summary: fixed the off-by-one.", draft=False)


def test_create_then_reuse(env: Env) -> None:
    first = open_pr(env.port)
    assert first.created and first.number == 1
    assert (first.head_branch, first.base_branch) == (HEAD, "main")
    assert first.url == f"{env.api.base_url}/acme/widgets/pull/1"
    body = env.api.pulls[0].body
    assert "Summary: fixed the off-by-one." in body
    assert execution_marker("exec-7") in body and "exec-7" in body
    second = open_pr(env.port)
    assert not second.created and second.number == first.number
    assert env.api.posts == 1


def test_default_base_is_the_repository_default_branch(env: Env) -> None:
    ref = open_pr(env.port, base=None)
    assert ref.base_branch == "main" and env.api.pulls[0].base == "main"


def test_duplicate_422_is_looked_up_again_and_reused(env: Env) -> None:
    existing = env.api.add_pull("acme", "widgets", HEAD, "main")
    env.api.hide_next_listing = True  # another process opened it between lookup and create
    ref = open_pr(env.port)
    assert (ref.number, ref.created) == (existing.number, False)
    assert env.api.posts == 1 and len(env.api.pulls) == 1


def test_reuse_searches_every_page_for_the_same_base(env: Env) -> None:
    env.api.page_size = 1
    env.api.add_pull("acme", "widgets", HEAD, "other")
    env.api.add_pull("acme", "widgets", HEAD, "other")
    wanted = env.api.add_pull("acme", "widgets", HEAD, "main")
    ref = open_pr(env.port)
    assert (ref.number, ref.base_branch, ref.created) == (wanted.number, "main", False)
    assert env.api.posts == 0
    listed = [path for method, path in env.api.requests if "/pulls?" in path]
    assert any("page=3" in path for path in listed)


def test_missing_base_branch_is_a_clear_error(env: Env) -> None:
    with pytest.raises(ToolFailure) as caught:
        open_pr(env.port, base="renamed-main")
    assert caught.value.code == ErrorCode.GIT_ERROR
    assert caught.value.details["reason"] == "base_branch_missing"
    assert "renamed-main" in caught.value.message
    assert env.api.posts == 0


@pytest.mark.parametrize(("status", "code", "retryable"), [
    (401, ErrorCode.AUTH_FAILED, False),
    (403, ErrorCode.AUTH_FAILED, False),
    (502, ErrorCode.INTEGRATION_UNAVAILABLE, True),
    (503, ErrorCode.INTEGRATION_UNAVAILABLE, True),
    (429, ErrorCode.INTEGRATION_UNAVAILABLE, True),
])
def test_errors_are_mapped(env: Env, status: int, code: ErrorCode, retryable: bool) -> None:
    env.api.fail_next = [status]
    with pytest.raises(ToolFailure) as caught:
        open_pr(env.port)
    assert (caught.value.code, caught.value.retryable) == (code, retryable)


def test_wrong_token_is_auth_failed(env: Env) -> None:
    port = GitHubPullRequests(env.api.api_url, "wrong", "acme", "widgets",
                              seconds_between_requests=0, seconds_between_writes=0)
    with pytest.raises(ToolFailure) as caught:
        open_pr(port)
    assert caught.value.code == ErrorCode.AUTH_FAILED
    assert "wrong" not in str(caught.value.details)


def test_unreachable_api_is_retryable(env: Env) -> None:
    port = GitHubPullRequests("http://127.0.0.1:9/api/v3", TOKEN, "acme", "widgets",
                              seconds_between_requests=0, seconds_between_writes=0, timeout_s=5)
    with pytest.raises(ToolFailure) as caught:
        open_pr(port)
    assert caught.value.code == ErrorCode.INTEGRATION_UNAVAILABLE and caught.value.retryable


class CountingPort:
    """A port that counts its calls, delegating to the GitHub port."""

    def __init__(self, inner: GitHubPullRequests) -> None:
        self.inner = inner
        self.calls = 0

    def create_or_reuse(self, *, execution_id: str, workspace: Path, head_branch: str,
                        base_branch: str | None, title: str, body: str,
                        draft: bool) -> PullRequestRef:
        self.calls += 1
        return self.inner.create_or_reuse(
            execution_id=execution_id, workspace=workspace, head_branch=head_branch,
            base_branch=base_branch, title=title, body=body, draft=draft)


def test_keyed_port_calls_the_wrapped_port_once_per_execution(env: Env) -> None:
    counting = CountingPort(env.port)
    ledger = InMemoryPullRequestLedger()
    keyed = KeyedPullRequestPort(counting, ledger)
    first = open_pr(keyed)
    assert first.created
    # A retry, even one whose PR was since closed on GitHub, never opens a second one.
    env.api.pulls[0].state = "closed"
    again = [open_pr(KeyedPullRequestPort(counting, ledger)) for _ in range(3)]
    assert counting.calls == 1 and env.api.posts == 1
    assert all(r.number == first.number and not r.created for r in again)
    other = open_pr(keyed, execution_id="exec-8", head="other")
    assert other.created and other.number != first.number and counting.calls == 2


def test_keyed_port_records_nothing_when_the_wrapped_port_fails(env: Env) -> None:
    counting = CountingPort(env.port)
    ledger = InMemoryPullRequestLedger()
    keyed = KeyedPullRequestPort(counting, ledger)
    env.api.fail_next = [503]
    with pytest.raises(ToolFailure):
        open_pr(keyed)
    assert ledger.get("exec-7") is None
    ref = open_pr(keyed)
    assert ref.created and counting.calls == 2 and env.api.posts == 1
