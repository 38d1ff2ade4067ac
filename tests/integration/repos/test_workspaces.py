"""Workspace provisioning against a real git smart-HTTP host: URL rules, token handling, the
mirror cache, branches and identity, disk cap, cleanup and the orphan reaper."""

from __future__ import annotations

import base64
import logging
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode, ExecutionError, StudioError, ToolFailure
from services.execution.messages import ToolCall
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.git import tools as git_domain
from services.repos.credentials import TokenGitAuth
from services.repos.mirrors import MirrorCache
from services.repos.origins import IntegrationGitAuth
from services.repos.urls import RepositoryUrlRejected, github_repo_from_url, validate_repo_url
from services.repos.workspaces import (
    MARKER,
    WorkspaceDiskExceeded,
    adopt_workspace,
    cleanup,
    provision_workspace,
    reap_orphans,
    remote_branch_sha,
    slugify,
)
from services.settings import StudioSettings
from tests.integration.workspace_fixtures import (
    AUTHOR,
    REPO,
    TOKEN,
    Remote,
    git_auth_for,
    plain_git,
    tree_contains,
)
from tests.support.git_http_server import git_http_server, redirecting_host, seed_bare_repo
from tests.support.settings import studio_settings

__all__ = ["remote", "settings"]  # fixtures


@pytest.fixture
def settings(tmp_path: Path) -> StudioSettings:
    return studio_settings(tmp_path / "data", workspace_dir=tmp_path / "workspaces",
                           git_author_name=AUTHOR[0], git_author_email=AUTHOR[1])


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    """``acme/widgets`` (``main`` plus ``develop``, ~400 KB of incompressible content) on a host
    that requires :data:`TOKEN`."""
    with git_http_server(tmp_path / "git-host", TOKEN) as host:
        files: dict[str, bytes | str] = {"README.md": "# widgets\n",
                                         "blob.bin": os.urandom(400_000)}
        bare = seed_bare_repo(host.root, REPO, files, extra_branches=("develop",))
        yield Remote(host=host, url=host.url(REPO), bare=bare)


def auth_of(remote: Remote, token: str = TOKEN) -> IntegrationGitAuth:
    return git_auth_for(remote.host.base_url, token)

REFUSED = [
    "ext::sh -c touch% /tmp/pwned",
    "file:///etc",
    "FILE:///etc/passwd",
    "-uhttps://x",
    "--upload-pack=touch /tmp/x",
    "https://user:tok@host/x.git",
    "https://tok@github.com/o/r.git",
    "http://example.com/x.git",
    "http://10.0.0.1/x.git",
    "ssh://git@github.com/o/r.git",
    "git://github.com/o/r.git",
    "git@github.com:o/r.git",
    "fd::17",
    "https://github.com/o/r.git\n",
    "https://github.com/o/ r.git",
    "https://github.com/o/r.git?x=1",
    "https://github.com/o/r.git#frag",
    "https://github.com",
    "https://github.com:99999/o/r.git",
    "",
]


@pytest.mark.parametrize("url", REFUSED)
@pytest.mark.parametrize("from_api", [True, False])
def test_refused_urls(url: str, from_api: bool) -> None:
    with pytest.raises(RepositoryUrlRejected) as caught:
        validate_repo_url(url, from_api=from_api)
    assert caught.value.code == ErrorCode.INVALID_ARGUMENTS
    assert "tok@" not in str(caught.value.details)


@pytest.mark.parametrize(("url", "origin"), [
    ("https://github.com/o/r.git", "https://github.com"),
    ("https://GitHub.com:443/o/r", "https://github.com"),
    ("http://127.0.0.1:8080/o/r.git", "http://127.0.0.1:8080"),
    ("http://localhost/o/r.git", "http://localhost"),
    ("http://[::1]:9000/o/r.git", "http://[::1]:9000"),
])
def test_accepted_urls(url: str, origin: str) -> None:
    repo = validate_repo_url(url, from_api=True)
    assert (repo.url, repo.origin, repo.local) == (url, origin, False)


def test_same_repository_spelled_differently_shares_a_cache_key() -> None:
    keys = {validate_repo_url(u, from_api=True).cache_key
            for u in ("https://github.com/o/r.git", "https://GITHUB.com/o/r/",
                      "https://github.com:443/o/r")}
    assert keys == {"https://github.com/o/r"}


def test_local_paths_only_from_the_cli(tmp_path: Path) -> None:
    with pytest.raises(RepositoryUrlRejected):
        validate_repo_url(str(tmp_path), from_api=True)
    local = validate_repo_url(str(tmp_path), from_api=False)
    assert local.local and local.url == str(tmp_path.resolve())
    with pytest.raises(RepositoryUrlRejected):
        validate_repo_url(str(tmp_path / "missing"), from_api=False)


@pytest.mark.parametrize(("url", "override", "expected"), [
    ("https://github.com/acme/widgets.git", None, ("acme", "widgets")),
    ("http://127.0.0.1:9/git/acme/widgets/", None, ("acme", "widgets")),
    ("/srv/mirror/x.git", "acme/widgets", ("acme", "widgets")),
])
def test_github_repo_from_url(url: str, override: str | None,
                              expected: tuple[str, str]) -> None:
    assert github_repo_from_url(url, override) == expected


@pytest.mark.parametrize(("url", "override"), [("https://h/x.git", None),
                                               ("https://h/o/r.git", "not-a-pair")])
def test_github_repo_needs_owner_and_name(url: str, override: str | None) -> None:
    with pytest.raises(RepositoryUrlRejected):
        github_repo_from_url(url, override)


def test_token_auth_is_scoped_to_its_origin() -> None:
    auth = TokenGitAuth(TOKEN, "https://github.com")
    env = auth.environment("https://github.com/acme/widgets.git")
    assert set(env) == {"GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_VALUE_0",
                        "GIT_CONFIG_KEY_1", "GIT_CONFIG_VALUE_1"}
    assert env["GIT_CONFIG_KEY_0"] == "http.https://github.com/.extraHeader"
    credential = env["GIT_CONFIG_VALUE_0"].removeprefix("Authorization: Basic ")
    assert base64.b64decode(credential).decode() == f"x-access-token:{TOKEN}"
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("http.followRedirects",
                                                                    "false")
    for other in ("https://evil.example/acme/widgets.git", "http://github.com/a/b.git",
                  "https://github.com:8443/a/b.git", "ext::sh -c x"):
        assert auth.environment(other) == {}
    assert TOKEN not in repr(auth)


@pytest.mark.parametrize(("text", "slug"), [
    ("Fix the failing test!", "fix-the-failing-test"),
    ("   ", "task"),
    ("Ünïcode & ../../etc/passwd", "n-code-etc-passwd"),
    ("a" * 100, "a" * 40),
])
def test_slugify(text: str, slug: str) -> None:
    assert slugify(text) == slug


def test_provision_with_token(remote: Remote, settings: StudioSettings, tmp_path: Path,
                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    ws = provision_workspace("exec-42", remote.url, base_branch=None, git_auth=auth_of(remote),
                             settings=settings, slug="Fix the widget counter")
    assert ws.branch == "studio/exec-42-fix-the-widget-counter"
    assert ws.base_branch == "main"
    assert ws.base_commit == plain_git(remote.bare, "rev-parse", "refs/heads/main")
    assert plain_git(ws.path, "symbolic-ref", "--short", "HEAD") == ws.branch
    assert plain_git(ws.path, "rev-parse", "HEAD") == ws.base_commit
    assert plain_git(ws.path, "remote", "get-url", "origin") == remote.url
    assert ws.path.parent == settings.workspace_dir / "exec-42"  # type: ignore[operator]

    # Commits carry the configured identity whatever the user's own git config says.
    home = tmp_path / "user-home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Someone Else\n\temail = else@x.invalid\n")
    (ws.path / "new.txt").write_text("x\n")
    user_env = {"HOME": str(home), "GIT_CONFIG_GLOBAL": str(home / ".gitconfig")}
    plain_git(ws.path, "add", "new.txt", env=user_env)
    plain_git(ws.path, "commit", "-q", "-m", "change", env=user_env)
    assert plain_git(ws.path, "log", "-1", "--format=%an <%ae>") == f"{AUTHOR[0]} <{AUTHOR[1]}>"

    # The token is nowhere: not in the workspace tree (.git included), the mirror, the logs.
    encoded = base64.b64encode(f"x-access-token:{TOKEN}".encode())
    for needle in (TOKEN.encode(), encoded):
        assert tree_contains(ws.root, needle) == []
        assert tree_contains(settings.data_dir, needle) == []
    assert TOKEN not in (ws.path / ".git" / "config").read_text()
    assert TOKEN not in caplog.text and encoded.decode() not in caplog.text
    assert all(r.authenticated for r in remote.host.requests)


def test_explicit_base_branch_and_remote_head(remote: Remote, settings: StudioSettings,
                                              tmp_path: Path) -> None:
    ws = provision_workspace("exec-dev", remote.url, base_branch="develop",
                             git_auth=auth_of(remote), settings=settings, slug="x")
    assert ws.base_branch == "develop"
    assert ws.base_commit == plain_git(remote.bare, "rev-parse", "refs/heads/develop")
    seed_bare_repo(remote.host.root, "acme/trunky", {"a": "1\n"}, branch="trunk")
    other = provision_workspace("exec-trunk", remote.host.url("acme/trunky"), base_branch=None,
                                git_auth=auth_of(remote), settings=settings, slug="y")
    assert other.base_branch == "trunk"
    with pytest.raises(ExecutionError) as caught:
        provision_workspace("exec-bad", remote.url, base_branch="--upload-pack=x",
                            git_auth=auth_of(remote), settings=settings, slug="z")
    assert caught.value.code == ErrorCode.INVALID_ARGUMENTS


def test_base_commit_pins_the_start(remote: Remote, settings: StudioSettings) -> None:
    first = plain_git(remote.bare, "rev-parse", "refs/heads/main")
    ws = provision_workspace("exec-pin", remote.url, base_branch="main", git_auth=auth_of(remote),
                             settings=settings, slug="pin", base_commit=first)
    assert ws.base_commit == first
    with pytest.raises(ToolFailure) as caught:
        provision_workspace("exec-pin2", remote.url, base_branch="main", git_auth=auth_of(remote),
                            settings=settings, slug="pin", base_commit="0" * 40)
    assert caught.value.code == ErrorCode.GIT_ERROR
    assert not (settings.workspace_dir / "exec-pin2").exists()  # type: ignore[operator]


@pytest.mark.parametrize("token", ["wrong-token-0123456789", None])
def test_wrong_or_missing_token_is_auth_failed(remote: Remote, settings: StudioSettings,
                                               token: str | None) -> None:
    with pytest.raises(ToolFailure) as caught:
        provision_workspace("exec-denied", remote.url, base_branch=None,
                            git_auth=auth_of(remote, token) if token else None,
                            settings=settings, slug="x")
    assert caught.value.code == ErrorCode.AUTH_FAILED
    assert "wrong-token" not in str(caught.value) + str(caught.value.details)
    assert not (settings.workspace_dir / "exec-denied").exists()  # type: ignore[operator]


def test_invalid_execution_id_and_url_are_refused(remote: Remote,
                                                  settings: StudioSettings) -> None:
    for execution_id, url in (("../escape", remote.url), ("ok-id", "file:///etc")):
        with pytest.raises(StudioError) as caught:
            provision_workspace(execution_id, url, base_branch=None, git_auth=auth_of(remote),
                                settings=settings, slug="x")
        assert caught.value.code == ErrorCode.INVALID_ARGUMENTS
    assert remote.host.requests == []


def test_mirror_cache_makes_a_second_clone_cheap(remote: Remote,
                                                 settings: StudioSettings) -> None:
    provision_workspace("exec-a", remote.url, base_branch=None,
                        git_auth=auth_of(remote), settings=settings, slug="a")
    first = remote.host.pack_bytes_sent
    assert first > 400_000
    ws = provision_workspace("exec-b", remote.url, base_branch=None, git_auth=auth_of(remote),
                             settings=settings, slug="b")
    second = remote.host.pack_bytes_sent - first
    assert second < first * 0.10, (first, second)
    assert (ws.path / "blob.bin").stat().st_size == 400_000
    # The clone borrows the mirror's objects instead of copying them (test_borrowed_history).
    assert (ws.path / ".git" / "objects" / "info" / "alternates").is_file()
    assert plain_git(ws.path, "fsck", "--connectivity-only") == ""


def test_mirror_follows_new_commits(remote: Remote, settings: StudioSettings,
                                    tmp_path: Path) -> None:
    provision_workspace("exec-1", remote.url, base_branch=None,
                        git_auth=auth_of(remote), settings=settings, slug="a")
    seed = tmp_path / "pusher"
    plain_git(tmp_path, "clone", "-q", str(remote.bare), str(seed))
    (seed / "more.txt").write_text("more\n")
    plain_git(seed, "add", "more.txt")
    plain_git(seed, "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "more")
    plain_git(seed, "push", "-q", "origin", "HEAD:main")
    ws = provision_workspace("exec-2", remote.url, base_branch=None, git_auth=auth_of(remote),
                             settings=settings, slug="b")
    assert ws.base_commit == plain_git(seed, "rev-parse", "HEAD")
    assert (ws.path / "more.txt").is_file()


def test_concurrent_provisioning_of_one_repository(remote: Remote,
                                                   settings: StudioSettings) -> None:
    errors: list[BaseException] = []

    def one(n: int) -> None:
        try:
            provision_workspace(f"exec-c{n}", remote.url, base_branch=None,
                                git_auth=auth_of(remote), settings=settings, slug="c")
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for n in range(4):
        ws = settings.workspace_dir / f"exec-c{n}" / "repo"  # type: ignore[operator]
        assert (ws / "blob.bin").stat().st_size == 400_000


def test_redirects_are_not_followed_and_the_token_stays_home(tmp_path: Path,
                                                             settings: StudioSettings) -> None:
    with git_http_server(tmp_path / "elsewhere", TOKEN) as target:
        seed_bare_repo(target.root, REPO, {"a": "1\n"})
        with redirecting_host(target.base_url) as front:
            with pytest.raises(ToolFailure):
                provision_workspace("exec-r", front.base_url + f"/{REPO}.git", base_branch=None,
                                    git_auth=git_auth_for(front.base_url), settings=settings,
                                    slug="r")
            assert front.requests, "the first host was asked"
        assert target.requests == [], "the redirect was followed"


def test_remote_branch_sha_and_one_push(remote: Remote, settings: StudioSettings) -> None:
    ws = provision_workspace("exec-p", remote.url, base_branch=None, git_auth=auth_of(remote),
                             settings=settings, slug="push")
    env = dict(TokenGitAuth(TOKEN, remote.host.base_url).environment(remote.url))
    assert remote_branch_sha(remote.url, ws.branch, env) is None
    assert remote_branch_sha(remote.url, "main", env) == ws.base_commit
    (ws.path / "f.txt").write_text("f\n")
    plain_git(ws.path, "add", "f.txt")
    plain_git(ws.path, "commit", "-q", "-m", "f")
    head = plain_git(ws.path, "rev-parse", "HEAD")
    subprocess.run(["git", "push", "-q", "origin", ws.branch], cwd=ws.path, check=True,
                   env={"PATH": "/usr/bin:/bin", "HOME": str(ws.root), "GIT_CONFIG_NOSYSTEM": "1",
                        "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0", **env})
    assert remote_branch_sha(remote.url, ws.branch, env) == head
    assert [u.new for u in remote.host.pushes_of(ws.branch)] == [head]
    with pytest.raises(ToolFailure) as caught:
        remote_branch_sha(remote.url, ws.branch, {})
    assert caught.value.code == ErrorCode.AUTH_FAILED


def test_disk_cap(remote: Remote, settings: StudioSettings) -> None:
    with pytest.raises(WorkspaceDiskExceeded) as caught:
        provision_workspace("exec-big", remote.url, base_branch=None, git_auth=auth_of(remote),
                            settings=settings, slug="big", disk_cap_bytes=100_000)
    assert caught.value.code == ErrorCode.BUDGET_EXCEEDED
    assert caught.value.details["used_bytes"] > 100_000
    assert not (settings.workspace_dir / "exec-big").exists()  # type: ignore[operator]


def test_cleanup_and_reaper(remote: Remote, settings: StudioSettings) -> None:
    spaces = [provision_workspace(f"exec-{n}", remote.url, base_branch=None,
                                  git_auth=auth_of(remote), settings=settings, slug="x")
              for n in range(3)]
    root = spaces[0].root.parent
    unrelated = root / "not-ours"
    unrelated.mkdir()
    cleanup(spaces[0])
    assert not spaces[0].root.exists()
    removed = reap_orphans(root, live_execution_ids={"exec-2"})
    assert removed == [spaces[1].root]
    assert spaces[2].root.is_dir() and (spaces[2].root / MARKER).is_file()
    assert unrelated.is_dir()


def test_lru_eviction_keeps_the_cache_under_its_cap(remote: Remote, settings: StudioSettings,
                                                    tmp_path: Path) -> None:
    seed_bare_repo(remote.host.root, "acme/other", {"o.bin": b"o" * 1000})
    cache = MirrorCache(tmp_path / "mirrors", size_cap_bytes=200_000)
    first = provision_workspace("exec-m1", remote.url, base_branch=None,
                                git_auth=auth_of(remote), settings=settings, slug="m",
                                mirror_cache=cache)
    big = cache.mirror_path(validate_repo_url(remote.url, from_api=True))
    assert big.is_dir()  # the one in use is kept even over the cap
    cleanup(first)  # its workspace no longer borrows it (leases: test_borrowed_history)
    provision_workspace("exec-m2", remote.host.url("acme/other"), base_branch=None,
                        git_auth=auth_of(remote), settings=settings, slug="m", mirror_cache=cache)
    assert not big.exists()
    assert [m.name for m in cache.mirrors()] == [
        cache.mirror_path(validate_repo_url(remote.host.url("acme/other"), from_api=True)).name]


def test_local_path_from_the_cli(remote: Remote, settings: StudioSettings) -> None:
    ws = provision_workspace("exec-local", str(remote.bare), base_branch=None, git_auth=None,
                             settings=settings, slug="local", allow_local=True)
    assert ws.base_branch == "main" and (ws.path / "README.md").is_file()
    assert plain_git(ws.path, "symbolic-ref", "--short", "HEAD") == ws.branch
    with pytest.raises(RepositoryUrlRejected):
        provision_workspace("exec-local2", str(remote.bare), base_branch=None, git_auth=None,
                            settings=settings, slug="local")


def test_git_domain_pushes_the_provisioned_branch_once(remote: Remote,
                                                       settings: StudioSettings) -> None:
    """The agent's push through the dispatcher: authenticated by ``TokenGitAuth``, accepted by
    the git domain's transport checks (provisioning writes no ``http.*`` config), chunked when
    over 1 MiB, one ref update on the remote, and still no token in the workspace."""
    ws = provision_workspace("exec-push", remote.url, base_branch=None, git_auth=auth_of(remote),
                             settings=settings, slug="push it")
    auth = TokenGitAuth(TOKEN, remote.host.base_url)
    ctx = ToolDomainContext(workspace_root=ws.path, execution_id="exec-push", request_id="r",
                            correlation_id="c", branch=ws.branch, default_branch=ws.base_branch,
                            git_auth=auth, git_author_name=AUTHOR[0],
                            git_author_email=AUTHOR[1])
    (ws.path / "big.bin").write_bytes(os.urandom(1_500_000))
    dispatcher = Dispatcher(ToolRegistry(git_domain.SPECS))
    for n, (operation, args) in enumerate([("add", {"paths": ["big.bin"]}),
                                           ("commit", {"message": "big"}), ("push", {})]):
        call = ToolCall(call_id=f"c{n}", tool_name=f"git_{operation}", domain="git",
                        operation=operation, args=args)
        envelope = envelope_to_json(dispatcher.dispatch(call, ctx))
        assert envelope["ok"], envelope
    head = plain_git(ws.path, "rev-parse", "HEAD")
    assert [u.new for u in remote.host.pushes_of(ws.branch)] == [head]
    assert remote.host.chunked_requests >= 1
    assert remote_branch_sha(remote.url, ws.branch, auth.environment(remote.url)) == head
    assert tree_contains(ws.root, TOKEN.encode()) == []


def test_each_attempt_has_a_directory_of_its_own(remote: Remote,
                                                 settings: StudioSettings) -> None:
    """A new attempt's provisioning never replaces, and a stale attempt's cleanup never deletes,
    another attempt's worktree (issue 17)."""
    first = provision_workspace("exec-att", remote.url, base_branch=None, git_auth=auth_of(remote),
                                settings=settings, slug="a", attempt=1)
    (first.path / "edit.txt").write_text("the first attempt's edit\n")
    second = provision_workspace("exec-att", remote.url, base_branch=None, git_auth=auth_of(remote),
                                 settings=settings, slug="a", attempt=2)
    assert first.root != second.root and first.branch == second.branch
    assert (first.path / "edit.txt").read_text() == "the first attempt's edit\n"
    assert not (second.path / "edit.txt").exists()
    cleanup(first)  # the stale attempt ends: only its own directory goes
    assert not first.root.exists() and (second.path / "README.md").is_file()
    with pytest.raises(ExecutionError) as caught:  # an attempt's directory is never reused
        provision_workspace("exec-att", remote.url, base_branch=None, git_auth=auth_of(remote),
                            settings=settings, slug="a", attempt=2)
    assert caught.value.code is ErrorCode.SUBSTRATE_ERROR
    assert (second.path / "README.md").is_file()


def test_the_reaper_keeps_every_attempt_of_a_live_execution(remote: Remote,
                                                            settings: StudioSettings) -> None:
    spaces = [provision_workspace(eid, remote.url, base_branch=None, git_auth=auth_of(remote),
                                  settings=settings, slug="x", attempt=n)
              for eid, n in (("exec-live", 1), ("exec-live", 2), ("exec-done", 1))]
    root = spaces[0].root.parent
    asked: list[str] = []

    def live() -> list[str]:  # asked after listing: a directory listed is never an orphan
        asked.append("live")  # because its execution started after the query
        return ["exec-live"]

    assert reap_orphans(root, live) == [spaces[2].root]
    assert asked == ["live"]
    assert spaces[0].root.is_dir() and spaces[1].root.is_dir()


def test_a_resume_without_a_checkpoint_takes_the_old_attempts_directory_over(
        remote: Remote, settings: StudioSettings) -> None:
    """Over-cap checkpoint: the new attempt renames the old directory into its own, so the old
    process (if it still runs) loses its paths instead of sharing the worktree."""
    old = provision_workspace("exec-big2", remote.url, base_branch=None, git_auth=auth_of(remote),
                              settings=settings, slug="b", attempt=1)
    (old.path / "big.bin").write_bytes(b"x" * 1000)
    new = adopt_workspace(old, 3)
    assert not old.root.exists() and new.root.name == "exec-big2+attempt-3"
    assert (new.path / "big.bin").read_bytes() == b"x" * 1000
    assert plain_git(new.path, "symbolic-ref", "--short", "HEAD") == old.branch


def test_the_reaper_leaves_another_deployments_workspaces_alone(
        remote: Remote, settings: StudioSettings, tmp_path: Path) -> None:
    """Two installations on one host share a workspace root; each reaper knows only its own
    executions, so a workspace it did not make is not an orphan to it."""
    from pydantic import SecretStr

    from services.repos.workspaces import deployment_mark

    ours = settings.model_copy(update={"database_url": SecretStr(
        "postgresql+psycopg://alice:pw-one@127.0.0.1:5432/studio_a")})
    theirs = settings.model_copy(update={"database_url": SecretStr(
        "postgresql://bob:pw-two@127.0.0.1:5432/studio_b")})
    mine = provision_workspace("exec-ours", remote.url, base_branch=None,
                               git_auth=auth_of(remote), settings=ours, slug="x", attempt=1)
    other = provision_workspace("exec-theirs", remote.url, base_branch=None,
                                git_auth=auth_of(remote), settings=theirs, slug="x", attempt=1)
    root = mine.root.parent
    legacy = root / "exec-old+attempt-1"  # an earlier release's marker: the execution id alone
    legacy.mkdir()
    (legacy / MARKER).write_text("exec-old\n")
    garbage = root / "exec-garbage+attempt-1"  # a marker that is not text
    garbage.mkdir()
    (garbage / MARKER).write_bytes(b"\xff\xfe\x00deployment=\x00\n" * 50)
    linked = root / "exec-linked+attempt-1"  # a marker that is a symlink is not followed
    linked.mkdir()
    (linked / MARKER).symlink_to(mine.root / MARKER)

    marker = (mine.root / MARKER).read_text()
    assert "pw-one" not in marker and "alice" not in marker and "127.0.0.1" not in marker
    removed = reap_orphans(root, [], mark=deployment_mark(ours))
    assert set(removed) == {mine.root, legacy, garbage}
    assert other.root.is_dir() and linked.is_dir()
    assert reap_orphans(root, [], mark=deployment_mark(theirs)) == [other.root]


def test_a_deployment_is_its_database_not_its_credentials(settings: StudioSettings) -> None:
    from pydantic import SecretStr

    from services.repos.workspaces import deployment_mark

    def mark(url: str | None) -> str:
        return deployment_mark(settings.model_copy(
            update={"database_url": SecretStr(url) if url is not None else None}))

    same = {mark("postgresql://a:x@db.internal:5432/studio"),
            mark("postgresql+psycopg://b:y@db.internal:5432/studio"),
            mark("postgres://db.internal:5432/studio")}
    assert len(same) == 1
    others = {mark("postgresql://a:x@db.internal:5432/other"),
              mark("postgresql://a:x@db2.internal:5432/studio"),
              mark("postgresql://a:x@db.internal:6543/studio"),
              mark("sqlite:////srv/a/studio.db"), mark("sqlite:////srv/b/studio.db"),
              mark(None), mark("postgresql://h:notaport/studio")}
    assert len(others) == 7 and not others & same
