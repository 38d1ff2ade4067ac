"""Workspaces that borrow their history from the mirror cache (issue 12): the clone holds its
checkout and little else, the agent's history tools and a sandboxed ``git log``/``git blame``
still work, a command cannot write to the mirror, and the mirror stays while it is leased."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode, ExecutionError
from services.execution.messages import ToolCall
from services.execution.ports import GitAuth
from services.execution.sandbox.layout import bwrap_workspace_args
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.git import tools as git_domain
from services.repos.mirrors import MirrorCache, tree_size
from services.repos.origins import IntegrationGitAuth
from services.repos.urls import validate_repo_url
from services.repos.workspaces import (
    Workspace,
    adopt_workspace,
    borrowed_mirror,
    cleanup,
    keep,
    provision_workspace,
)
from services.settings import StudioSettings
from tests.integration.workspace_fixtures import (
    AUTHOR,
    REPO,
    TOKEN,
    Remote,
    git_auth_for,
    plain_git,
)
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.settings import studio_settings
from tests.unit.execution.command_helpers import run_command, sandbox_context

HISTORY = 30  # commits on top of the seed, each appending a line to notes.txt


@pytest.fixture
def settings(tmp_path: Path) -> StudioSettings:
    return studio_settings(tmp_path / "data", workspace_dir=tmp_path / "workspaces",
                           git_author_name=AUTHOR[0], git_author_email=AUTHOR[1])


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    """``acme/widgets`` with a 1 MB incompressible file and a history of :data:`HISTORY`
    commits by different authors (so ``git blame`` has something to say)."""
    with git_http_server(tmp_path / "git-host", TOKEN) as host:
        bare = seed_bare_repo(host.root, REPO, {"big.bin": os.urandom(1_000_000),
                                               "notes.txt": "seed\n"})
        work = tmp_path / "history"
        plain_git(tmp_path, "clone", "-q", str(bare), str(work))
        for n in range(HISTORY):
            with (work / "notes.txt").open("a") as notes:
                notes.write(f"line {n}\n")
            plain_git(work, "-c", f"user.name=author{n}", "-c", f"user.email=a{n}@x",
                      "commit", "-q", "-am", f"change {n}")
        plain_git(work, "push", "-q", "origin", "HEAD:main")
        yield Remote(host=host, url=host.url(REPO), bare=bare)


def auth_of(remote: Remote) -> IntegrationGitAuth:
    return git_auth_for(remote.host.base_url, TOKEN)


def provision(remote: Remote, settings: StudioSettings, execution_id: str,
              **kwargs: Any) -> Workspace:
    return provision_workspace(execution_id, remote.url, base_branch=None,
                               git_auth=auth_of(remote), settings=settings, slug="x", **kwargs)


def git_tool(ws: Workspace, operation: str, auth: GitAuth | None = None,
             **args: Any) -> dict[str, Any]:
    ctx = ToolDomainContext(workspace_root=ws.path, execution_id=ws.execution_id,
                            request_id="r", correlation_id="c", branch=ws.branch,
                            default_branch=ws.base_branch, git_author_name=AUTHOR[0],
                            git_author_email=AUTHOR[1], git_auth=auth)
    call = ToolCall(call_id="c1", tool_name=f"git_{operation}", domain="git",
                    operation=operation, args=args)
    envelope = envelope_to_json(Dispatcher(ToolRegistry(git_domain.SPECS)).dispatch(call, ctx))
    assert envelope["ok"], envelope
    result: dict[str, Any] = envelope["result"]
    return result


def test_the_workspace_borrows_the_mirror_instead_of_copying_it(
        remote: Remote, settings: StudioSettings) -> None:
    ws = provision(remote, settings, "exec-small")
    mirror = borrowed_mirror(ws.path)
    assert mirror is not None and mirror.parent == settings.data_dir / "mirrors"
    checkout = tree_size(ws.path) - tree_size(ws.path / ".git")
    own_objects = tree_size(ws.path / ".git" / "objects")
    assert checkout > 1_000_000
    assert own_objects < 50_000, own_objects  # the 1 MB blob lives in the mirror only
    assert tree_size(mirror / "objects") > 1_000_000
    assert plain_git(ws.path, "fsck", "--connectivity-only") == ""
    # what an operator reads (studio executions show, the run page): the checkout and little
    # else, the history borrowed; test_without_mirrors_the_clone_is_whole is the control
    assert ws.disk is not None and ws.disk.borrows_mirror
    assert ws.disk.checkout_bytes == checkout
    assert ws.disk.own_bytes <= checkout * 1.1, ws.disk


def _upload_pack_posts(remote: Remote, since: int) -> int:
    return sum(1 for r in remote.host.requests[since:]
               if r.method == "POST" and r.service == "git-upload-pack")


def test_a_warm_clone_is_made_from_the_mirror_not_from_the_remote(
        remote: Remote, settings: StudioSettings) -> None:
    """Warm, the remote is asked twice (its head branch, and the mirror's fetch, which finds
    nothing to download); the clone itself is local. The cold provisioning (the control) also
    downloads the pack."""
    provision(remote, settings, "exec-cold")
    cold_posts, cold_bytes = _upload_pack_posts(remote, 0), remote.host.pack_bytes_sent
    seen = len(remote.host.requests)
    ws = provision(remote, settings, "exec-warm")
    assert cold_posts == 3  # ls-remote's ls-refs; the fetch's ls-refs, then its fetch
    assert _upload_pack_posts(remote, seen) == 2  # the two ls-refs, no fetch, no clone
    assert remote.host.pack_bytes_sent - cold_bytes < 2_000  # two ref advertisements
    assert plain_git(ws.path, "remote", "get-url", "origin") == remote.url
    assert plain_git(ws.path, "symbolic-ref", "refs/remotes/origin/HEAD") == \
        "refs/remotes/origin/main"
    assert plain_git(ws.path, "rev-parse", "origin/main") == ws.base_commit


def test_history_tools_work_on_a_borrowed_clone(remote: Remote,
                                                settings: StudioSettings) -> None:
    ws = provision(remote, settings, "exec-history")
    commits = git_tool(ws, "log", max_count=100)["commits"]
    assert len(commits) == HISTORY + 1
    first = commits[-1]["sha"]
    shown = git_tool(ws, "show", ref=first)
    assert {f["path"] for f in shown["files"]} == {"big.bin", "notes.txt"}
    (ws.path / "notes.txt").write_text("rewritten\n")
    changed = git_tool(ws, "diff", ref=ws.base_commit)
    assert [f["path"] for f in changed["files"]] == ["notes.txt"]
    assert "-line 29" in changed["patch"]


@pytest.mark.parametrize("mode", ["bwrap", "bwrap-session", "landlock"])
def test_sandboxed_history_commands_read_the_mirror_but_cannot_write_it(
        remote: Remote, settings: StudioSettings, mode: str) -> None:
    ws = provision(remote, settings, f"exec-{mode}")
    with sandbox_context(ws.path, mode) as ctx:
        _history_and_no_writes(ws, ctx)


def _history_and_no_writes(ws: Workspace, ctx: ToolDomainContext) -> None:
    mirror = borrowed_mirror(ws.path)
    assert mirror is not None
    blame = run_command(ctx, command="git blame --line-porcelain notes.txt | grep '^author '")
    assert blame["ok"] and blame["result"]["exit_code"] == 0, blame
    authors = set(blame["result"]["stdout"].split("\n")) - {""}
    assert len(authors) == HISTORY + 1  # every line knows its own author
    log = run_command(ctx, argv=["git", "log", "--oneline"])
    assert log["result"]["exit_code"] == 0 and len(log["result"]["stdout"].splitlines()) == 31
    before = sorted(p.name for p in (mirror / "objects").rglob("*"))
    objects = mirror / "objects"
    for attempt in (f"touch {objects}/planted", f"rm -rf {objects}/pack",
                    f"echo x > {objects}/info/alternates",
                    f"git --git-dir={mirror} update-ref refs/heads/evil HEAD",
                    "git gc --prune=now"):
        run_command(ctx, command=attempt)
    assert sorted(p.name for p in (mirror / "objects").rglob("*")) == before
    assert "evil" not in plain_git(mirror, "for-each-ref")
    assert plain_git(ws.path, "fsck", "--connectivity-only") == ""


def mirror_state(mirror: Path) -> dict[str, str]:
    """Every file of the mirror (objects, refs, config) with a digest of its content.

    Not its modification time: git *freshens* an object it would write but finds, in an
    alternate too (``utime``), which only makes it look recently used to a ``prune``."""
    return {str(path.relative_to(mirror)): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in mirror.rglob("*") if path.is_file()}


def test_unsandboxed_commands_can_write_the_mirror(remote: Remote,
                                                   settings: StudioSettings) -> None:
    """The control of the test above: without a sandbox the same uid can write the mirror,
    so the witness (the mirror's files and refs) does see a write when there is one."""
    ws = provision(remote, settings, "exec-none")
    mirror = borrowed_mirror(ws.path)
    assert mirror is not None
    before = mirror_state(mirror)
    with sandbox_context(ws.path, "none") as ctx:
        run_command(ctx, command=f"touch {mirror / 'objects'}/planted")
    assert mirror_state(mirror) != before


def test_the_models_git_tools_write_only_the_workspaces_own_objects(
        remote: Remote, settings: StudioSettings) -> None:
    """The git domain runs in the harness, unsandboxed: its commit, branch and fetch add
    objects and refs to the workspace's own ``.git`` (git never writes into an alternate), and
    the mirror is left as it was."""
    ws = provision(remote, settings, "exec-git-tools")
    mirror = borrowed_mirror(ws.path)
    assert mirror is not None
    before = mirror_state(mirror)
    (ws.path / "notes.txt").write_text("rewritten by the model\n")
    (ws.path / "new.bin").write_bytes(os.urandom(200_000))
    git_tool(ws, "add")
    sha = git_tool(ws, "commit", message="the model's change")["sha"]
    git_tool(ws, "create_branch", name="studio/exec-git-tools-2")
    git_tool(ws, "fetch", auth=auth_of(remote))
    assert plain_git(ws.path, "cat-file", "-t", sha) == "commit"  # written, in the workspace
    assert subprocess.run(["git", "--git-dir", str(mirror), "cat-file", "-e", sha],
                          capture_output=True, check=False).returncode != 0
    assert mirror_state(mirror) == before
    assert tree_size(ws.path / ".git" / "objects") > 100_000  # the new blob is the clone's own


def test_only_the_borrowed_objects_are_bound_read_only(remote: Remote,
                                                       settings: StudioSettings) -> None:
    ws = provision(remote, settings, "exec-binds")
    mirror = borrowed_mirror(ws.path)
    assert mirror is not None
    args = bwrap_workspace_args(ws.path)
    assert args[-3:] == ["--ro-bind", str(mirror / "objects"), str(mirror / "objects")]
    assert str(mirror) not in [a for a in args if a != str(mirror / "objects")]


def test_a_leased_mirror_is_not_evicted_until_its_workspace_is_gone(
        remote: Remote, settings: StudioSettings, tmp_path: Path) -> None:
    seed_bare_repo(remote.host.root, "acme/other", {"o.bin": b"o" * 1000})
    cache = MirrorCache(tmp_path / "mirrors", size_cap_bytes=10_000)
    ws = provision(remote, settings, "exec-leased", mirror_cache=cache)
    big = cache.mirror_path(validate_repo_url(remote.url, from_api=True))
    other = provision_workspace("exec-other", remote.host.url("acme/other"), base_branch=None,
                                git_auth=auth_of(remote), settings=settings, slug="o",
                                mirror_cache=cache)
    assert big.is_dir()  # over the cap, but leased by exec-leased
    assert cache.evict() == []  # both leased
    assert not cache.collect_garbage(big)
    assert plain_git(ws.path, "log", "--oneline", "-1") != ""
    cleanup(ws)
    assert cache.evict() == [big]
    assert not big.exists() and other.path.is_dir()
    cleanup(other)


def test_a_kept_workspace_no_longer_needs_the_mirror(remote: Remote,
                                                     settings: StudioSettings,
                                                     tmp_path: Path) -> None:
    cache = MirrorCache(tmp_path / "mirrors", size_cap_bytes=0)
    ws = provision(remote, settings, "exec-kept", mirror_cache=cache)
    keep(ws)
    assert borrowed_mirror(ws.path) is None
    assert [m.name for m in cache.evict()] == [
        cache.mirror_path(validate_repo_url(remote.url, from_api=True)).name]
    assert plain_git(ws.path, "fsck", "--connectivity-only") == ""
    assert len(plain_git(ws.path, "log", "--oneline").splitlines()) == HISTORY + 1


CRASHED_ATTEMPT = """
import sys
from pathlib import Path
from services.repos.mirrors import MirrorCache
from services.repos.workspaces import provision_workspace
from tests.integration.workspace_fixtures import git_auth_for
from tests.support.settings import studio_settings
url, base, token, data, spaces, mirrors = sys.argv[1:]
ws = provision_workspace("exec-adopt", url, base_branch=None, git_auth=git_auth_for(base, token),
                         settings=studio_settings(Path(data), workspace_dir=Path(spaces)),
                         slug="x", attempt=1, mirror_cache=MirrorCache(Path(mirrors), 0))
print(ws.path)
"""


def crashed_attempt(remote: Remote, settings: StudioSettings, cache: MirrorCache) -> Workspace:
    """An attempt provisioned by another process that then died (its lease with it)."""
    out = subprocess.run(
        [sys.executable, "-c", CRASHED_ATTEMPT, remote.url, remote.host.base_url, TOKEN,
         str(settings.data_dir), str(settings.workspace_dir), str(cache.root)],
        check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ":".join(
            p for p in sys.path if p)}).stdout
    path = Path(out.strip())
    commit = plain_git(path, "rev-parse", "HEAD")
    return Workspace(path, "main", commit, plain_git(path, "symbolic-ref", "--short", "HEAD"),
                     remote.url, "exec-adopt")


def test_an_adopted_workspace_takes_its_own_lease(remote: Remote, settings: StudioSettings,
                                                  tmp_path: Path) -> None:
    """A resume that adopts a dead attempt's clone leases the mirror again; when the mirror
    went in between, adoption fails cleanly and a resume in a fresh directory works."""
    cache = MirrorCache(tmp_path / "mirrors", size_cap_bytes=0)
    adopted = adopt_workspace(crashed_attempt(remote, settings, cache), 2)
    assert cache.evict() == []  # leased by the adoption
    assert len(git_tool(adopted, "log", max_count=100)["commits"]) == HISTORY + 1
    cleanup(adopted)
    dead = crashed_attempt(remote, settings, cache)
    assert len(cache.evict()) == 1  # nobody holds it any more
    with pytest.raises(ExecutionError) as caught:
        adopt_workspace(dead, 3)
    assert caught.value.code is ErrorCode.SUBSTRATE_ERROR
    fresh = provision(remote, settings, "exec-adopt", mirror_cache=cache, attempt=4,
                      base_commit=dead.base_commit)
    assert fresh.base_commit == dead.base_commit
    assert len(git_tool(fresh, "log", max_count=100)["commits"]) == HISTORY + 1
    cleanup(fresh)


def test_without_mirrors_the_clone_is_whole(remote: Remote, tmp_path: Path) -> None:
    """``STUDIO_REPO_MIRRORS=false`` (an executor pod): straight from the remote, no borrowing."""
    settings = studio_settings(tmp_path / "pod-data", workspace_dir=tmp_path / "pod-ws",
                               repo_mirrors=False)
    ws = provision(remote, settings, "exec-pod")
    assert borrowed_mirror(ws.path) is None
    assert not (tmp_path / "pod-data" / "mirrors").exists()
    assert tree_size(ws.path / ".git" / "objects") > 1_000_000
    assert ws.disk is not None and not ws.disk.borrows_mirror
    assert ws.disk.own_bytes > ws.disk.checkout_bytes + 1_000_000  # the history is its own
