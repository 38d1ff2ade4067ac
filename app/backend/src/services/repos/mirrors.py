"""A local cache of bare mirrors, one per repository, so a repeated clone costs little.

Layout under ``root``: ``<digest>.git`` (a bare repository holding the remote's branches and tags),
``<digest>.lock`` (an ``fcntl`` lock file: one update at a time), ``<digest>.lease`` (shared
``fcntl`` locks, one per workspace borrowing the mirror's objects) and ``<digest>.used`` (touched
at each use: the LRU clock). ``digest`` hashes the repository's normalized URL
(:attr:`ValidatedRepo.cache_key`).

:meth:`MirrorCache.checkout` takes a :class:`MirrorLease` (a shared lock on ``.lease``), then the
update lock, updates the mirror (the branch the remote's ``HEAD`` names, recorded as the mirror's
``HEAD``, and one ``git fetch --prune`` straight from the URL: no remote, no URL and no credential
stored in the mirror's config; the token comes as ``GIT_CONFIG_*`` environment), releases the
update lock and yields the mirror, the lease and the remote's head branch while the caller clones
*from the mirror*, locally, with ``git clone --shared``: no request to the remote, no object
copied, no connectivity walk; the clone *borrows* the mirror's objects
(``objects/info/alternates``), so a workspace holds its checkout and little else, whatever the
depth of the history. The caller keeps the lease for the life of the
execution. While any lease is held the mirror is never evicted, and its objects are never
deleted: the mirror's fetch runs with ``gc.auto=0`` (a fetch only adds objects; ``--prune``
removes refs, not objects), and garbage collection happens only when nobody borrows the mirror
(:meth:`MirrorCache.collect_garbage`).
When the mirrors together exceed ``size_cap_bytes``, the least recently used are deleted (never
the one in use, never one leased or being updated by another process).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

from services.execution.tool_domains.git.runner import run_git
from services.repos.remote_head import find_remote_head
from services.repos.urls import ValidatedRepo

log = logging.getLogger(__name__)
DEFAULT_MIRROR_CAP_BYTES = 5 * 1024**3
MIRROR_REFSPECS = ("+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*")
# A cold mirror downloads the whole history (SymPy: 240 MB): more than run_git's default 120 s
# on a slow link or a busy machine. A warm fetch takes a fraction of a second.
MIRROR_FETCH_TIMEOUT_S = 1800.0


def tree_size(path: Path) -> int:
    """Bytes used by the files under ``path`` (symlinks not followed)."""
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, name)).st_size
    return total


@contextlib.contextmanager
def _locked(lock_path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``lock_path``; yields False when non-blocking and busy."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        flags = fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


class MirrorLease:
    """A shared hold on one mirror: while it is open, the mirror is neither evicted nor
    garbage-collected. Held by the process that runs the execution (an ``flock`` dies with its
    process, so a crashed worker never pins a mirror forever); :meth:`release` is idempotent."""

    def __init__(self, mirror: Path, fd: int) -> None:
        self.mirror = mirror
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor drops its flock


def lease_mirror(mirror: Path) -> MirrorLease:
    """A :class:`MirrorLease` on ``mirror`` (a ``<digest>.git`` directory), waiting while the
    mirror is being evicted."""
    fd = os.open(mirror.with_suffix(".lease"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except BaseException:
        os.close(fd)
        raise
    return MirrorLease(mirror, fd)


def _head_of(mirror: Path) -> str | None:
    """The branch the mirror's ``HEAD`` names (read from the file: no git process)."""
    try:
        text = (mirror / "HEAD").read_text().strip()
    except OSError:
        return None
    return text.removeprefix("ref: refs/heads/") if text.startswith("ref: refs/heads/") else None


class MirrorCheckout(NamedTuple):
    """An up-to-date mirror (``path``), the caller's lease on it, and the branch the remote's
    ``HEAD`` names (None when it names none)."""

    path: Path
    lease: MirrorLease
    head: str | None


class MirrorCache:
    """Bare mirrors under ``root``, evicted least-recently-used beyond ``size_cap_bytes``."""

    def __init__(self, root: Path, size_cap_bytes: int = DEFAULT_MIRROR_CAP_BYTES) -> None:
        self.root = root
        self.size_cap_bytes = size_cap_bytes

    def mirror_path(self, repo: ValidatedRepo) -> Path:
        return self.root / f"{repo.digest}.git"

    def _lock_path(self, mirror: Path) -> Path:
        return mirror.with_suffix(".lock")

    def _lease_path(self, mirror: Path) -> Path:
        return mirror.with_suffix(".lease")

    def _used_path(self, mirror: Path) -> Path:
        return mirror.with_suffix(".used")

    @contextlib.contextmanager
    def checkout(self, repo: ValidatedRepo,
                 env: Mapping[str, str]) -> Iterator[MirrorCheckout]:
        """The up-to-date mirror of ``repo`` and a lease on it that outlives the block: the
        caller releases it when its clone is gone. Updates take turns (the update lock); the
        caller's clone does not hold that lock (another execution's fetch only adds objects and
        moves refs atomically). On an exception inside the block the lease is released here."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        mirror = self.mirror_path(repo)
        lease = lease_mirror(mirror)
        try:
            with _locked(self._lock_path(mirror)):
                head = self._update(repo, mirror, env)
                self._used_path(mirror).touch()
            yield MirrorCheckout(mirror, lease, head)
        except BaseException:
            lease.release()
            raise
        self.evict(keep=mirror)

    def _update(self, repo: ValidatedRepo, mirror: Path, env: Mapping[str, str]) -> str | None:
        """Bring ``mirror`` up to date: the remote's head branch (returned, and recorded as the
        mirror's ``HEAD``), then one fetch of its branches and tags. Nothing here walks the
        history: the fetch negotiates from the refs and checks connectivity from them."""
        if not (mirror / "HEAD").is_file():
            shutil.rmtree(mirror, ignore_errors=True)
            run_git(self.root, ["init", "--quiet", "--bare", "--", str(mirror)])
            # Workspaces borrow these objects, so a fetch must never delete any (no auto gc).
            run_git(mirror, ["config", "gc.auto", "0"])
            run_git(mirror, ["config", "maintenance.auto", "false"])
        log.info("updating mirror %s of %s", mirror.name, repo.cache_key)
        head = find_remote_head(mirror, repo.url, env)
        run_git(mirror, ["fetch", "--quiet", "--prune", "--no-tags", "--no-recurse-submodules",
                         "--no-write-fetch-head", "--upload-pack=git-upload-pack",
                         "--end-of-options", repo.url, *MIRROR_REFSPECS], env_extra=env,
                timeout_s=MIRROR_FETCH_TIMEOUT_S)
        if head is not None and _head_of(mirror) != head:
            run_git(mirror, ["symbolic-ref", "HEAD", f"refs/heads/{head}"])
        return head

    def collect_garbage(self, mirror: Path) -> bool:
        """``git gc`` on ``mirror`` when no workspace borrows it and nobody updates it; False
        (nothing done) otherwise."""
        with _locked(self._lock_path(mirror), blocking=False) as updating, \
                _locked(self._lease_path(mirror), blocking=False) as unleased:
            if not (updating and unleased):
                return False
            run_git(mirror, ["gc", "--quiet", "--prune=now"])
            return True

    def mirrors(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.glob("*.git") if p.is_dir())

    def evict(self, *, keep: Path | None = None) -> list[Path]:
        """Delete least recently used mirrors until the total fits the cap; the deleted paths."""
        sizes = {m: tree_size(m) for m in self.mirrors()}
        total = sum(sizes.values())
        removed: list[Path] = []
        by_age = sorted(sizes, key=self._last_used)
        for mirror in by_age:
            if total <= self.size_cap_bytes:
                break
            if mirror == keep:
                continue
            with _locked(self._lock_path(mirror), blocking=False) as updating, \
                    _locked(self._lease_path(mirror), blocking=False) as unleased:
                if not (updating and unleased):
                    continue
                shutil.rmtree(mirror, ignore_errors=True)
                self._used_path(mirror).unlink(missing_ok=True)
            total -= sizes[mirror]
            removed.append(mirror)
            log.info("evicted mirror %s (%d bytes)", mirror.name, sizes[mirror])
        return removed

    def _last_used(self, mirror: Path) -> float:
        try:
            return self._used_path(mirror).stat().st_mtime
        except FileNotFoundError:
            return 0.0
