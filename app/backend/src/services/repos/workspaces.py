"""Workspace provisioning: an ephemeral clone per execution, on the agent's own branch.

:func:`provision_workspace` validates the repository URL (:mod:`services.repos.urls`), resolves
the base branch (the remote's HEAD unless given, with ``git ls-remote --symref``), clones through
the local mirror cache (:mod:`services.repos.mirrors`) with ``git clone --reference <mirror>``
(the clone borrows the mirror's objects through ``objects/info/alternates`` and holds a
:class:`~services.repos.mirrors.MirrorLease` on it until :func:`cleanup` or :func:`keep`), records
the base commit, creates and checks out
``studio/<execution-id>-<slug>``, and sets the repository's ``user.name``/``user.email`` to the
configured identity (so commits made inside the sandbox carry it too, whatever the user's git
config says). Every git process goes through the hardened ``run_git``; the token reaches git only
as ``GIT_CONFIG_*`` environment from the execution's ``GitAuth``
(:class:`services.repos.origins.IntegrationGitAuth`: the integration's origins only, the host
re-checked before the first network access), so it is never written to the workspace, the
mirror, a URL or a log.

Layout: ``<workspace_dir or $TMPDIR/studio-workspaces>/<execution-id>+attempt-<epoch>/repo``
for an attempt of a durable execution (``attempt`` = its lease epoch), so no two attempts ever
share a directory: an attempt creates its own (never replacing an existing one) and deletes only
its own (:func:`cleanup`); a stale attempt cannot destroy the lease holder's worktree, nor a new
attempt the old one's. Without an attempt (the CLI demo) it is ``<execution-id>/repo``, replaced
when provisioned again. Each directory holds a ``.studio-workspace`` marker so
:func:`reap_orphans` only ever deletes directories this module made, and only once their
execution is no longer live; the marker names the deployment (:func:`deployment_mark`), so a
reaper leaves alone the workspaces of another installation sharing the root. A workspace over
its disk cap fails with ``budget_exceeded``
(:class:`WorkspaceDiskExceeded`); :func:`check_disk` re-checks it during a run.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from services.db.session import resolve_url
from services.execution.errors import ErrorCode, ExecutionError, ToolFailure
from services.execution.ports import GitAuth, RunControl
from services.execution.tool_domains.git.runner import GitAuthor, empty_home, run_git
from services.repos.credentials import TokenGitAuth
from services.repos.disk_use import DiskUse, measure
from services.repos.mirrors import (
    MIRROR_FETCH_TIMEOUT_S,
    MirrorCache,
    MirrorLease,
    lease_mirror,
    tree_size,
)
from services.repos.remote_head import no_head_branch, remote_head_branch
from services.repos.urls import (
    RepositoryUrlRejected,
    ValidatedRepo,
    github_repo_from_url,
    validate_repo_url,
)
from services.settings import StudioSettings

log = logging.getLogger(__name__)

__all__ = [
    "DiskUse", "RepositoryUrlRejected", "TokenGitAuth", "ValidatedRepo", "Workspace",
    "WorkspaceDiskExceeded", "adopt_workspace", "attempt_directory", "borrowed_mirror",
    "check_disk", "cleanup", "deployment_mark", "disk_room_check", "disk_use",
    "github_repo_from_url", "keep", "provision_workspace", "reap_orphans", "remote_branch_sha",
    "slugify", "validate_repo_url",
]

DEFAULT_DISK_CAP_BYTES = 2 * 1024**3
MARKER = ".studio-workspace"
DEPLOYMENT_KEY = "deployment="
MAX_SLUG = 40
ATTEMPT_SEPARATOR = "+attempt-"  # "+" never occurs in an execution id (see _EXECUTION_ID)
_EXECUTION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# The mirror leases this process holds, by the workspace directory (Workspace.root) that borrows.
_LEASES: dict[Path, MirrorLease] = {}


class WorkspaceDiskExceeded(ExecutionError):
    """The workspace grew past its disk cap."""

    default_code = ErrorCode.BUDGET_EXCEEDED


@dataclass(frozen=True)
class Workspace:
    """A provisioned workspace: the clone at ``path``, on ``branch``, made from ``base_commit``."""

    path: Path
    base_branch: str
    base_commit: str
    branch: str
    remote_url: str
    execution_id: str = ""
    disk_cap_bytes: int = DEFAULT_DISK_CAP_BYTES
    # what the workspace held itself when provisioned (None for an adopted one)
    disk: DiskUse | None = None

    @property
    def root(self) -> Path:
        """The execution's directory (the clone's parent), removed by :func:`cleanup`."""
        return self.path.parent


def slugify(text: str) -> str:
    """``text`` as a branch-name slug: lowercase, ``[a-z0-9-]``, at most 40 characters."""
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:MAX_SLUG].strip("-")
    return slug or "task"


def workspace_root(settings: StudioSettings) -> Path:
    """Where execution directories live."""
    return settings.workspace_dir or Path(tempfile.gettempdir()) / "studio-workspaces"


def deployment_mark(settings: StudioSettings) -> str:
    """Which deployment made a workspace: a digest of its database's location (scheme, host,
    port and database or file; never the credentials), written in the workspace's marker.

    Two installations on one host share the default workspace root; each one's reaper knows only
    its own executions, and must not take the other's live workspaces for orphans."""
    url = urlsplit(resolve_url(settings))
    try:
        port = url.port
    except ValueError:  # not a port: the location is still told apart by the rest
        port = None
    scheme = url.scheme.split("+")[0]
    location = f"{scheme}://{url.hostname or ''}:{port or ''}{url.path}"
    return hashlib.sha256(location.encode()).hexdigest()[:16]


def default_mirror_cache(settings: StudioSettings) -> MirrorCache:
    return MirrorCache(settings.data_dir / "mirrors")


def _invalid(message: str, **details: object) -> ExecutionError:
    return ExecutionError(message, code=ErrorCode.INVALID_ARGUMENTS, details=dict(details))


def _auth_env(repo: ValidatedRepo, git_auth: GitAuth | None) -> Mapping[str, str]:
    if git_auth is None or repo.origin is None:
        return {}
    return git_auth.environment(repo.url)


def _checked_branch(cwd: Path, name: str) -> str:
    found = run_git(cwd, ["check-ref-format", "--branch", name], check=False)
    if name.startswith("-") or found.returncode != 0 or found.text.strip() != name:
        raise _invalid(f"{name!r} is not a valid branch name", field="branch", value=name[:100])
    return name


def remote_branch_sha(remote_url: str, branch: str, auth_env: Mapping[str, str]) -> str | None:
    """The commit ``refs/heads/<branch>`` has on the remote, or ``None`` when it does not exist
    (used by the finalizer to skip a push that was already done)."""
    home = empty_home()
    _checked_branch(home, branch)
    found = run_git(home, ["ls-remote", "--upload-pack=git-upload-pack", "--end-of-options",
                           remote_url, f"refs/heads/{branch}"], env_extra=auth_env)
    for line in found.text.splitlines():
        sha, _, ref = line.partition("\t")
        if ref.strip() == f"refs/heads/{branch}":
            return sha.strip()
    return None


def _clone(repo: ValidatedRepo, dest: Path, base: str | None, env: Mapping[str, str],
           cache: MirrorCache | None, author: GitAuthor) -> tuple[str, MirrorLease | None]:
    """Clone ``base`` (default: the remote's head branch) into ``dest``; the branch, and the
    lease on the mirror the clone borrows from, if any.

    Through the mirror cache, the clone is made from the freshly updated mirror, locally, with
    ``--shared`` (its ``objects/info/alternates`` names the mirror's object directory): the
    refs are copied and the base checked out, nothing else; its ``origin`` is then pointed at
    the repository's URL, so fetches and pushes go there as from any clone."""
    # the identity goes into the clone's config as it is made (no git process of its own)
    common = ["clone", "--quiet", "--no-recurse-submodules", "--upload-pack=git-upload-pack",
              "--config", f"user.name={author.name}", "--config", f"user.email={author.email}"]
    if repo.local or cache is None:
        base = base or remote_head_branch(dest.parent, repo.url, env)
        extra = ["--no-hardlinks"] if repo.local else []
        run_git(dest.parent, [*common, *extra, "--branch", base, "--", repo.url, str(dest)],
                env_extra=env, timeout_s=MIRROR_FETCH_TIMEOUT_S)  # the whole history, too
        return base, None
    with cache.checkout(repo, env) as (mirror, lease, head):
        base = base or head
        if base is None:
            raise no_head_branch()
        run_git(dest.parent, [*common, "--shared", "--branch", base, "--",
                              str(mirror.resolve()), str(dest)])
        run_git(dest, ["remote", "set-url", "origin", repo.url])
    return base, lease


def borrowed_mirror(path: Path) -> Path | None:
    """The mirror (``<digest>.git``) whose objects the clone at ``path`` borrows, if any."""
    alternates = path / ".git" / "objects" / "info" / "alternates"
    try:
        lines = alternates.read_text().split()
    except (FileNotFoundError, NotADirectoryError):
        return None
    for line in lines:
        objects = Path(line)
        if objects.is_absolute() and objects.name == "objects":
            return objects.parent
    return None


def _lease_borrowed(ws: Workspace) -> None:
    """Hold a lease on the mirror ``ws`` borrows from (adopting an earlier attempt's clone);
    ``substrate_error`` when that mirror is gone."""
    mirror = borrowed_mirror(ws.path)
    if mirror is None or ws.root in _LEASES:
        return
    lease = lease_mirror(mirror)
    if not (mirror / "objects").is_dir():
        lease.release()
        raise ExecutionError("the mirror the workspace borrows its history from is gone",
                             code=ErrorCode.SUBSTRATE_ERROR,
                             details={"execution_id": ws.execution_id})
    _LEASES[ws.root] = lease


def _release(ws: Workspace) -> None:
    lease = _LEASES.pop(ws.root, None)
    if lease is not None:
        lease.release()


def _start_branch(ws: Path, branch: str, base_commit: str | None, author: GitAuthor,
                  existing: bool = False) -> str:
    """Check out ``branch`` at ``base_commit`` (default: the cloned tip); the base commit id."""
    start = base_commit or "HEAD"
    if start.startswith("-"):
        raise _invalid("the base commit must be a commit id", field="base_commit")
    found = run_git(ws, ["rev-parse", "--verify", "--quiet", "--end-of-options",
                         f"{start}^{{commit}}"], check=False, author=author)
    if found.returncode != 0:
        raise ToolFailure(ErrorCode.GIT_ERROR, f"the base commit {start!r} is not in the clone",
                          details={"base_commit": start})
    commit = found.text.strip()
    # an existing branch (a follow-up works on the pull request's own) is reset to the base
    run_git(ws, ["checkout", "--quiet", "-B" if existing else "-b", branch, commit],
            author=author)
    return commit


def provision_workspace(
    execution_id: str,
    repo_url: str,
    *,
    base_branch: str | None,
    git_auth: GitAuth | None,
    settings: StudioSettings,
    slug: str,
    allow_local: bool = False,
    base_commit: str | None = None,
    mirror_cache: MirrorCache | None = None,
    disk_cap_bytes: int = DEFAULT_DISK_CAP_BYTES,
    attempt: int | None = None,
    work_branch: str | None = None,
) -> Workspace:
    """A fresh workspace for ``execution_id`` on ``studio/<execution-id>-<slug>``.

    ``allow_local`` admits a local path (the CLI); ``base_commit`` pins the start (a resumed
    execution re-clones at its recorded base); ``mirror_cache`` defaults to
    ``<data_dir>/mirrors``; ``git_auth`` gives each git process its credentials (and may refuse
    the host); ``attempt`` (the lease epoch) gives the attempt a directory of its own, which must
    not exist yet (``substrate_error`` when it does). Raises
    ``RepositoryUrlRejected``/``ExecutionError`` (``invalid_arguments``), ``ToolFailure``
    (``auth_failed``, ``git_error``, ``host_not_allowed``) or ``WorkspaceDiskExceeded``; nothing
    is left on disk after a failure. ``work_branch`` (a follow-up: the pull request's head
    branch, which is also ``base_branch``) is worked on instead of a new branch.
    """
    if not _EXECUTION_ID.match(execution_id):
        raise _invalid("the execution id is not a safe directory name", field="execution_id")
    repo = validate_repo_url(repo_url, from_api=not allow_local)
    env = _auth_env(repo, git_auth)
    author = GitAuthor(settings.git_author_name, settings.git_author_email)
    root = _make_directory(workspace_root(settings), execution_id, attempt,
                           deployment_mark(settings))
    branch = work_branch or f"studio/{execution_id}-{slugify(slug)}"
    try:
        wanted = None if base_branch is None else _checked_branch(root, base_branch)
        cache = (None if repo.local or not settings.repo_mirrors
                 else (mirror_cache or default_mirror_cache(settings)))
        base, lease = _clone(repo, root / "repo", wanted, env, cache, author)
        if lease is not None:
            _LEASES[root] = lease
        commit = _start_branch(root / "repo", branch, base_commit, author,
                               existing=work_branch is not None)
        disk = measure(root, root / "repo")
        _within_cap(disk.own_bytes, disk_cap_bytes)
        ws = Workspace(root / "repo", base, commit, branch, repo.url, execution_id,
                       disk_cap_bytes, disk)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        lease = _LEASES.pop(root, None)
        if lease is not None:
            lease.release()
        raise
    log.info("provisioned workspace for %s: %s on %s (base %s@%s)", execution_id, repo.cache_key,
             branch, base, commit[:12])
    return ws


def attempt_directory(root: Path, execution_id: str, attempt: int | None) -> Path:
    """The directory of one attempt of an execution (see the module docstring)."""
    name = execution_id if attempt is None else f"{execution_id}{ATTEMPT_SEPARATOR}{attempt}"
    return root / name


def _make_directory(root: Path, execution_id: str, attempt: int | None, mark: str) -> Path:
    directory = attempt_directory(root, execution_id, attempt)
    if attempt is None:
        shutil.rmtree(directory, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        directory.mkdir(mode=0o700)
    except FileExistsError:
        raise ExecutionError(f"the directory of attempt {attempt} already exists",
                             code=ErrorCode.SUBSTRATE_ERROR,
                             details={"execution_id": execution_id, "attempt": attempt}) from None
    (directory / MARKER).write_text(f"{execution_id}\n{DEPLOYMENT_KEY}{mark}\n")
    return directory


def adopt_workspace(ws: Workspace, attempt: int) -> Workspace:
    """Move an earlier attempt's workspace into the directory of ``attempt`` (a resume that
    cannot restore from a checkpoint): a rename, so the earlier attempt, if it still runs,
    loses its paths instead of sharing the worktree."""
    target = attempt_directory(ws.root.parent, ws.execution_id, attempt)
    ws.root.rename(target)
    lease = _LEASES.pop(ws.root, None)
    adopted = Workspace(target / ws.path.name, ws.base_branch, ws.base_commit, ws.branch,
                        ws.remote_url, ws.execution_id, ws.disk_cap_bytes)
    if lease is not None:
        _LEASES[adopted.root] = lease
    _lease_borrowed(adopted)
    return adopted


def check_disk(ws: Workspace) -> int:
    """The bytes the workspace uses; ``WorkspaceDiskExceeded`` when over its cap."""
    used = tree_size(ws.root)
    _within_cap(used, ws.disk_cap_bytes)
    return used


def disk_use(ws: Workspace) -> DiskUse:
    """What ``ws`` holds itself: as measured when provisioned, else (an adopted workspace)
    now."""
    return ws.disk or measure(ws.root, ws.path)


def _within_cap(used: int, cap: int) -> None:
    if used > cap:
        raise WorkspaceDiskExceeded(
            f"the workspace uses {used} bytes, over its cap of {cap}",
            details={"resource": "disk", "used_bytes": used, "cap_bytes": cap})


LARGE_WRITE_BYTES = 1024 * 1024


def disk_room_check(ws: Workspace) -> Callable[[int], None]:
    """The tool context's ``disk_check``: before a workspace tool writes ``planned`` bytes (1 MiB
    or more; smaller writes are left to :class:`DiskGuard`), refuse with ``budget_exceeded`` if
    the workspace would outgrow its disk cap. Measuring walks the tree, hence the threshold."""

    def check(planned: int) -> None:
        if planned < LARGE_WRITE_BYTES:
            return
        used = tree_size(ws.root)
        if used + planned > ws.disk_cap_bytes:
            raise ToolFailure(
                ErrorCode.BUDGET_EXCEEDED,
                f"writing {planned} bytes would take the workspace over its disk cap",
                details={"resource": "disk", "used_bytes": used, "planned_bytes": planned,
                         "cap_bytes": ws.disk_cap_bytes})

    return check


class DiskGuard:
    """A RunControl that stops the run (``budget_exceeded``) once the workspace outgrows its
    disk cap; measuring walks the tree, so it happens at most every ``interval_s`` seconds."""

    def __init__(self, inner: RunControl, ws: Workspace, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.inner = inner
        self.ws = ws
        self.interval_s = interval_s
        self.clock = clock
        self._next = 0.0

    def check(self) -> ErrorCode | None:
        code = self.inner.check()
        if code is not None or self.clock() < self._next:
            return code
        self._next = self.clock() + self.interval_s
        try:
            check_disk(self.ws)
        except WorkspaceDiskExceeded as exc:
            log.warning("execution %s: %s", self.ws.execution_id, exc.message)
            return ErrorCode.BUDGET_EXCEEDED
        return None


def cleanup(ws: Workspace) -> None:
    """Delete the attempt's directory (the clone and anything next to it) and release the lease
    on the mirror it borrowed from."""
    shutil.rmtree(ws.root, ignore_errors=True)
    _release(ws)


def keep(ws: Workspace) -> None:
    """Make a workspace that outlives its execution (``--keep-workspace``) independent of the
    mirror: copy the borrowed objects in (``git repack -a -d``, as ``--dissociate`` would), drop
    ``objects/info/alternates`` and release the lease."""
    alternates = ws.path / ".git" / "objects" / "info" / "alternates"
    if alternates.exists():
        run_git(ws.path, ["repack", "-a", "-d", "--quiet"], timeout_s=600)
        alternates.unlink()
    _release(ws)


def _execution_of(directory: Path) -> str:
    return directory.name.split(ATTEMPT_SEPARATOR, 1)[0]


def _marked_by(directory: Path, mark: str | None) -> bool:
    """The directory carries this module's marker, made by the deployment ``mark`` (a marker
    without a deployment, from an earlier release, counts as any deployment's)."""
    marker = directory / MARKER
    if directory.is_symlink() or marker.is_symlink() or not marker.is_file():
        return False
    if mark is None:
        return True
    try:
        lines = marker.read_text(errors="replace").splitlines()[:2]
    except OSError:
        return False
    found = [line[len(DEPLOYMENT_KEY):] for line in lines if line.startswith(DEPLOYMENT_KEY)]
    return not found or found[0] == mark


def reap_orphans(root: Path,
                 live_execution_ids: Iterable[str] | Callable[[], Iterable[str]], *,
                 mark: str | None = None) -> list[Path]:
    """Delete the workspace directories under ``root`` whose execution is no longer live; only
    directories carrying this module's marker are touched, and given ``mark``
    (:func:`deployment_mark`) only those its deployment made. The deleted paths.

    Pass the live ids as a callable: it is asked *after* the directories are listed, so an
    execution that started in between (its directory listed, its row missed) is never taken
    for an orphan."""
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    candidates = [child for child in sorted(root.iterdir()) if _marked_by(child, mark)]
    if not candidates:
        return removed
    ids = live_execution_ids() if callable(live_execution_ids) else live_execution_ids
    live = set(ids)
    for child in candidates:
        if _execution_of(child) in live:
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
        log.info("reaped orphan workspace %s", child)
    return removed
