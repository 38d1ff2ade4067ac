"""Dependency caches (pip, npm, ...) of the setup phase, one per writer, bounded in size and age.

A cache is written by the setup commands that run with it bound in, and read by every later
setup that gets the same one: whoever can write it decides what a later execution installs. So
a cache belongs to exactly one writer (:class:`CacheScope`):

* ``repository``: the commands of a branch's ``.studio/setup.json``, keyed on the repository
  (its canonical :attr:`~services.repos.urls.ValidatedRepo.digest`) **and the base branch**: a
  branch's setup file (anyone who can push that branch) writes only that branch's cache. A
  request that adds hosts to the allowlist those commands run with gets a separate one;
* ``request``: the ``setup`` commands of a request, keyed on the repository, the base branch
  and a digest of those commands and the request's ``network_allowlist``: a caller's commands
  write a cache only the very same commands on the same branch ever see.

The agent phase never gets a cache (:mod:`services.runs.setup_phase`).

Layout: ``<data_dir>/setup-caches/<key>/`` (``key``: a SHA-256 of the scope, 0700), holding
``data/`` (bound read-write at ``/run/studio-cache`` into that writer's setup commands, nothing
else of the entry is visible to them), ``lock`` (held shared while a setup uses the cache,
exclusive to evict it; its modification time is the last use) and ``size`` (bytes on disk of
``data/``, measured when a setup ends, without following a symlink).

Eviction (:meth:`DependencyCaches.evict`, run before each use): a cache unused for longer than
``STUDIO_DEPENDENCY_CACHE_MAX_AGE_DAYS`` is removed, then the least recently used ones until the
total is at most ``STUDIO_DEPENDENCY_CACHE_MAX_MB``; a cache in use is never removed, and one
that is alone larger than the bound is removed when its setup ends. The caches of the earlier
layout (``<data_dir>/dependency-caches/``, one per repository, shared by every branch, request
and agent) are removed at the first eviction: they may hold planted files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import stat
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from services.repos.urls import ValidatedRepo
from services.settings import StudioSettings

CACHES_DIRECTORY = "setup-caches"
LEGACY_DIRECTORY = "dependency-caches"
DATA = "data"
LOCK = "lock"
SIZE = "size"
ACQUIRE_ATTEMPTS = 5
_KEY_CHARS = frozenset("0123456789abcdef")


@dataclass(frozen=True)
class CacheScope:
    """Who writes a cache: ``writer`` (``repository`` or ``request``) for one repository and
    base branch; ``commands``: the request's setup commands and allowlist (``request`` only)."""

    repo_digest: str
    base_branch: str
    writer: str
    commands: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        text = json.dumps([self.repo_digest, self.base_branch, self.writer, list(self.commands)])
        return hashlib.sha256(text.encode()).hexdigest()


def repository_scope(repo: ValidatedRepo, base_branch: str,
                     allowlist: Sequence[str] = ()) -> CacheScope:
    """The cache of ``base_branch``'s ``.studio/setup.json`` commands; a request that widens
    the allowlist they run with (``allowlist``) gets a cache of its own for them."""
    return CacheScope(repo.digest, base_branch, "repository",
                      ("\0allowlist", *sorted(allowlist)) if allowlist else ())


def request_scope(repo: ValidatedRepo, base_branch: str, commands: Sequence[str],
                  allowlist: Sequence[str]) -> CacheScope:
    """The cache of one request's ``setup`` commands (and allowlist) on ``base_branch``."""
    return CacheScope(repo.digest, base_branch, "request",
                      (*commands, "\0allowlist", *sorted(allowlist)))


def tree_bytes(top: Path) -> int:
    """Bytes on disk of everything under ``top`` (``lstat``: a symlink is never followed)."""
    total = 0
    pending = [top]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                pending.append(Path(entry.path))
    return total


@dataclass(frozen=True)
class _Entry:
    path: Path
    last_used: float
    size: int


class DependencyCaches:
    """The caches under ``root``, at most ``max_bytes`` together, none unused for more than
    ``max_age_s`` (see the module's docstring)."""

    def __init__(self, root: Path, *, max_bytes: int, max_age_s: float) -> None:
        self.root = root
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s

    @contextlib.contextmanager
    def use(self, scope: CacheScope) -> Iterator[Path]:
        """The ``data`` directory of ``scope``'s cache, held (never evicted) until the block
        ends; then its size is recorded, and it is removed if it alone exceeds the bound."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.evict()
        entry = self.root / scope.key
        fd, data = self._acquire(entry)
        try:
            yield data
        finally:
            try:
                self._release(entry, fd, data)
            finally:
                os.close(fd)

    def _release(self, entry: Path, fd: int, data: Path) -> None:
        """Record the size and the use; remove a cache that alone exceeds the bound (unless
        another setup holds it too). Best effort: a failure here leaves a cache to evict."""
        size = tree_bytes(data)
        with contextlib.suppress(OSError):
            (entry / SIZE).write_text(str(size))
            os.utime(fd)
        if size > self.max_bytes and _try_exclusive(fd):
            _remove(entry)

    def _acquire(self, entry: Path) -> tuple[int, Path]:
        """Make (or find) ``entry`` and hold its lock shared; an eviction that removes it
        meanwhile is noticed (the lock file is no longer the one at the path) and retried."""
        for _ in range(ACQUIRE_ATTEMPTS):
            try:
                with contextlib.suppress(FileExistsError):
                    entry.mkdir(mode=0o700)
                fd = os.open(entry / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600)
            except FileNotFoundError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH)
                if os.fstat(fd).st_ino != os.stat(entry / LOCK, follow_symlinks=False).st_ino:
                    raise FileNotFoundError(entry / LOCK)
                data = entry / DATA
                with contextlib.suppress(FileExistsError):
                    data.mkdir(mode=0o700)
                if data.is_symlink() or not data.is_dir():
                    raise NotADirectoryError(f"the dependency cache {data} is not a directory")
                os.chmod(entry, 0o700)
                os.utime(fd)
                return fd, data
            except FileNotFoundError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
        raise OSError(f"the dependency cache {entry} kept being removed while it was acquired")

    def evict(self) -> list[Path]:
        """Remove the caches past the age bound, then the least recently used ones past the size
        bound (never one in use), and the earlier layout's; what was removed."""
        legacy = self.root.parent / LEGACY_DIRECTORY
        if legacy.is_dir() and not legacy.is_symlink():
            shutil.rmtree(legacy, ignore_errors=True)
        now = time.time()
        entries = sorted(self._entries(), key=lambda e: e.last_used)
        removed: list[Path] = []
        total = sum(e.size for e in entries)
        for entry in entries:
            if now - entry.last_used <= self.max_age_s and total <= self.max_bytes:
                continue
            if self._remove_unused(entry.path):
                removed.append(entry.path)
                total -= entry.size
        return removed

    def _entries(self) -> list[_Entry]:
        found: list[_Entry] = []
        try:
            names = os.listdir(self.root)
        except FileNotFoundError:
            return found
        for name in names:
            path = self.root / name
            if len(name) != 64 or not set(name) <= _KEY_CHARS or path.is_symlink():
                continue
            try:
                last_used = os.stat(path / LOCK, follow_symlinks=False).st_mtime
            except OSError:
                last_used = 0.0  # being made, or half removed: the age rule takes it if idle
            try:
                size = int((path / SIZE).read_text())
            except (OSError, ValueError):
                size = tree_bytes(path / DATA)
            found.append(_Entry(path, last_used, size))
        return found

    @staticmethod
    def _remove_unused(entry: Path) -> bool:
        try:
            fd = os.open(entry / LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600)
        except OSError:
            return False
        try:
            if not _try_exclusive(fd):
                return False  # in use
            _remove(entry)
            return True
        finally:
            os.close(fd)


def _try_exclusive(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _remove(entry: Path) -> None:
    """Remove a cache whose lock is held exclusively: its data first, the lock last (whoever
    waits on the lock then sees it gone and makes a new entry)."""
    data = entry / DATA
    if data.is_symlink():
        data.unlink()  # removed, never followed
    shutil.rmtree(data, ignore_errors=True)  # follows no symlink inside either
    with contextlib.suppress(FileNotFoundError):
        (entry / SIZE).unlink()
    with contextlib.suppress(FileNotFoundError):
        (entry / LOCK).unlink()
    with contextlib.suppress(OSError):
        entry.rmdir()


def dependency_caches(settings: StudioSettings) -> DependencyCaches:
    """The deployment's caches, with its bounds."""
    return DependencyCaches(settings.data_dir / CACHES_DIRECTORY,
                            max_bytes=settings.dependency_cache_max_mb * 1024 * 1024,
                            max_age_s=settings.dependency_cache_max_age_days * 86_400.0)
