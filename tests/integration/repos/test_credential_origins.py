"""The GitHub token goes only to the integration's git origin, whatever repository URL an
execution names (``studio run --repo``).

Two local git hosts: the integration's (``STUDIO_GITHUB_GIT_ORIGINS``), and a second one that
serves the same repository publicly and records every request's headers. An execution on the
second host is refused when it asks for a pull request; without one it clones and fetches
anonymously, and its pushes (the agent's and the finalizer's) go without credential and fail
``auth_failed``. The second host never sees the token, nor any ``Authorization`` header.
"""

from __future__ import annotations

import base64
import ipaddress
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.db.redaction import Redactor
from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode
from services.execution.messages import ToolCall
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.git import tools as git_domain
from services.execution.tool_domains.git.runner import empty_home, run_git
from services.repos.hosts import HostPolicy
from services.repos.origins import GitOrigins, IntegrationGitAuth
from services.repos.workspaces import provision_workspace
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from tests.integration.repo_env import (
    DONE,
    FAILING_PROJECT,
    REPO,
    TOKEN,
    RepoWorld,
    last_json,
    repo_world,
    studio,
)
from tests.support.git_http_server import (
    RECEIVE_PACK,
    UPLOAD_PACK,
    GitHttpHost,
    git_http_server,
    seed_bare_repo,
)

OTHER_TOKEN = "ghs_SecondHostOwnToken0123456789abcdef"
SECRETS = (TOKEN, base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode())
AGENT_CALLS: list[dict[str, Any]] = [
    {"tool": "git.fetch", "args": {}},
    {"tool": "workspace.write_file", "args": {"path": "calc.py",
                                              "content": "def add(a, b):\n    return a + b\n"}},
    {"tool": "git.add", "args": {"paths": ["calc.py"]}},
    {"tool": "git.commit", "args": {"message": "Fix add"}},
    {"tool": "git.push", "args": {}},
    {"tool": "git.create_pull_request", "args": {"title": "Fix add"}},
]


@dataclass
class TwoHosts:
    world: RepoWorld
    other: GitHttpHost

    @property
    def other_url(self) -> str:
        return self.other.url(REPO)


@pytest.fixture
def hosts(tmp_path: Path) -> Iterator[TwoHosts]:
    with repo_world(tmp_path) as world, \
            git_http_server(tmp_path / "other", OTHER_TOKEN, anonymous_reads=True) as other:
        seed_bare_repo(other.root, REPO, dict(FAILING_PROJECT))
        yield TwoHosts(world, other)


def assert_never_credentialed(host: GitHttpHost) -> None:
    """No request to ``host`` carried an ``Authorization`` header (so not the token)."""
    assert [r.authorization for r in host.requests if r.authorization] == []
    assert host.pushes == []


def _script(path: Path) -> Path:
    turns = [{"tool_calls": [call]} for call in AGENT_CALLS]
    path.write_text(json.dumps({"turns": [*turns, {"final": DONE}]}))
    return path


def test_a_pull_request_elsewhere_is_refused_before_any_network_access(
        hosts: TwoHosts, tmp_path: Path) -> None:
    env = hosts.world.env(tmp_path / "ws")
    done = studio(env, "run", "--repo", hosts.other_url, "--script",
                  str(_script(tmp_path / "s.json")), "--json", "Fix add")
    assert done.returncode == 2, done.stderr
    assert "integration_unavailable" in done.stderr
    assert hosts.other.base_url in done.stderr and "STUDIO_GITHUB_GIT_ORIGINS" in done.stderr
    assert hosts.other.requests == [] and hosts.world.host.requests == []
    assert hosts.world.api.requests == []


def test_without_a_pull_request_it_clones_anonymously_and_never_sends_the_token(
        hosts: TwoHosts, tmp_path: Path) -> None:
    env = hosts.world.env(tmp_path / "ws")
    done = studio(env, "run", "--repo", hosts.other_url, "--no-pr", "--script",
                  str(_script(tmp_path / "s.json")), "--json", "Fix add")
    summary = last_json(done.stdout)
    assert done.returncode == 1, done.stderr
    assert summary["error"]["code"] == ErrorCode.AUTH_FAILED.value  # the finalizer's push
    services = {r.service for r in hosts.other.requests}
    assert {UPLOAD_PACK, RECEIVE_PACK} <= services  # cloned, fetched, then tried to push
    assert_never_credentialed(hosts.other)
    assert hosts.world.host.requests == [] and hosts.world.api.requests == []
    for secret in SECRETS:
        assert secret not in done.stdout + done.stderr


def test_control_the_recorder_catches_the_token_when_the_other_host_is_the_integrations(
        hosts: TwoHosts, tmp_path: Path) -> None:
    """The positive control of the witness above: the same run, but with the second host named
    as the integration's origin. The token is then sent to it (that host's own token is another,
    so the push is still refused), its recorder holds it, and :func:`assert_never_credentialed`
    fails on it: the witness would catch a leak."""
    env = hosts.world.env(tmp_path / "ws")
    env["STUDIO_GITHUB_GIT_ORIGINS"] = hosts.other.base_url
    done = studio(env, "run", "--repo", hosts.other_url, "--no-pr", "--script",
                  str(_script(tmp_path / "s.json")), "--json", "Fix add")
    assert done.returncode == 1, done.stderr
    assert last_json(done.stdout)["error"]["code"] == ErrorCode.AUTH_FAILED.value
    sent = [r.authorization for r in hosts.other.requests if r.authorization]
    assert sent, "the token never reached the host named as the integration's"
    assert any(secret in header for header in sent for secret in SECRETS), sent
    with pytest.raises(AssertionError):
        assert_never_credentialed(hosts.other)


def test_the_integrations_own_origin_still_gets_the_token(hosts: TwoHosts,
                                                          tmp_path: Path) -> None:
    env = hosts.world.env(tmp_path / "ws")
    calls = [c for c in AGENT_CALLS if c["tool"] != "git.create_pull_request"]
    script = tmp_path / "own.json"
    script.write_text(json.dumps({"turns": [{"tool_calls": [c]} for c in calls]
                                  + [{"final": DONE}]}))
    done = studio(env, "run", "--repo", hosts.world.url, "--script", str(script), "--json",
                  "Fix add")
    summary = last_json(done.stdout)
    assert done.returncode == 0, done.stderr
    assert summary["pr_url"] and hosts.world.pulls_of(summary["branch"])
    assert all(r.authenticated for r in hosts.world.host.requests)
    assert hosts.other.requests == []


def test_the_git_domain_rechecks_the_host_right_before_it_connects(
        hosts: TwoHosts, tmp_path: Path) -> None:
    """A name that resolved to an allowed address when the workspace was made and to the
    metadata address at push time: the push is refused (``host_not_allowed``) and never
    reaches git."""
    answers = {"localhost": ["127.0.0.1"]}
    policy = HostPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
                        resolver=lambda host: answers.get(host, []))
    url = hosts.other.url(REPO).replace("127.0.0.1", "localhost")
    auth = IntegrationGitAuth(GitOrigins(frozenset(), "environment"), policy, TOKEN)
    settings = StudioSettings(workspace_dir=tmp_path / "ws", data_dir=tmp_path / "data")
    ws = provision_workspace("exec-rebind", url, base_branch=None, git_auth=auth,
                             settings=settings, slug="rebind")
    seen = len(hosts.other.requests)
    answers["localhost"] = ["169.254.169.254"]
    ctx = ToolDomainContext(workspace_root=ws.path, execution_id="exec-rebind",
                            request_id="r", correlation_id="c", branch=ws.branch,
                            default_branch=ws.base_branch, git_auth=auth)
    (ws.path / "x.txt").write_text("x\n")
    dispatcher = Dispatcher(ToolRegistry(git_domain.SPECS))
    results = [envelope_to_json(dispatcher.dispatch(ToolCall(
        call_id=f"c{n}", tool_name=f"git_{op}", domain="git", operation=op, args=args), ctx))
        for n, (op, args) in enumerate([("add", {"paths": ["x.txt"]}),
                                        ("commit", {"message": "x"}), ("push", {}),
                                        ("fetch", {})])]
    assert [r["ok"] for r in results] == [True, True, False, False]
    assert {r["error"]["code"] for r in results[2:]} == {ErrorCode.HOST_NOT_ALLOWED.value}
    assert len(hosts.other.requests) == seen
    assert_never_credentialed(hosts.other)


def test_an_internal_host_is_refused_when_the_run_is_asked_for(hosts: TwoHosts,
                                                               tmp_path: Path) -> None:
    env = hosts.world.env(tmp_path / "ws")
    done = studio(env, "run", "--repo", "https://169.254.169.254/latest/meta-data.git",
                  "--no-pr", "--script", str(_script(tmp_path / "s.json")), "Fix add")
    assert done.returncode == 2 and "host_not_allowed" in done.stderr, done.stderr


def test_the_worker_decides_again_before_any_network_access(hosts: TwoHosts,
                                                            tmp_path: Path) -> None:
    """Recorded while the host was the integration's, run by a worker whose integration has
    another origin: the attempt fails ``integration_unavailable`` without contacting it."""
    db = hosts.world.database()
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Fix add", repo_url=hosts.world.url,
            script={"turns": [{"final": DONE}]}), Redactor([TOKEN]),
            settings=hosts.world.settings())
        worker = hosts.world.settings().model_copy(update={
            "github_git_origins": ["https://github.com"], "workspace_dir": tmp_path / "ws"})
        outcome = execute_execution(execution_id, settings=worker, db=db)
    finally:
        db.dispose()
    assert outcome.status == "failed"
    assert outcome.run is not None and outcome.run.error is not None
    assert outcome.run.error["code"] == ErrorCode.INTEGRATION_UNAVAILABLE.value
    assert hosts.world.host.requests == [] and hosts.world.api.requests == []


def test_git_connects_to_the_addresses_that_were_checked(hosts: TwoHosts) -> None:
    """A name no resolver knows, checked as ``127.0.0.1``: git reaches the host only because it
    is pinned to the checked address (``http.curloptResolve``)."""
    policy = HostPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),),
                        resolver=lambda host: ["127.0.0.1"] if host == "git.studio.invalid"
                        else [])
    url = hosts.other.url(REPO).replace("127.0.0.1", "git.studio.invalid")
    auth = IntegrationGitAuth(GitOrigins(frozenset(), "environment"), policy, TOKEN)
    found = run_git(empty_home(), ["ls-remote", "--end-of-options", url, "HEAD"],
                    env_extra=auth.environment(url))
    assert found.text.strip().endswith("HEAD")
    unpinned = run_git(empty_home(), ["ls-remote", "--end-of-options", url, "HEAD"],
                       check=False)
    assert unpinned.returncode != 0
    assert_never_credentialed(hosts.other)
