"""Per-repository dependency caches (pip, npm, ...), reused across executions like the mirrors.

Layout: ``<data_dir>/dependency-caches/<digest>/`` where ``digest`` is the repository's
:attr:`~services.repos.urls.ValidatedRepo.digest` (its canonical identity: the same repository
however its URL is spelled). The directory is created ``0700`` and bound read-write into the
commands of that repository's executions only (at ``/run/studio-cache`` inside the sandbox,
:mod:`services.execution.sandbox.egress`): another repository's execution gets its own directory
and never sees this one, neither to read nor to write.

There is no eviction yet: ``studio``'s operators remove a directory to drop a cache (it is only
a cache; the next setup downloads again).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from services.repos.urls import ValidatedRepo
from services.settings import StudioSettings

CACHES_DIRECTORY = "dependency-caches"


def dependency_cache_root(settings: StudioSettings) -> Path:
    return settings.data_dir / CACHES_DIRECTORY


def dependency_cache(settings: StudioSettings, repo: ValidatedRepo) -> Path:
    """The cache directory of ``repo`` (created, owner-only); a symlink in its place is
    refused (the directory is bound into sandboxes)."""
    root = dependency_cache_root(settings)
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = root / repo.digest
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    if path.is_symlink() or not path.is_dir():
        raise NotADirectoryError(f"the dependency cache {path} is not a directory")
    os.chmod(path, 0o700)
    return path
