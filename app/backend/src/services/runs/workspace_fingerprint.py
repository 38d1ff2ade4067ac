"""A cheap test of whether a workspace can have changed since its last checkpoint.

A checkpoint (:func:`~services.runs.checkpoints.take_checkpoint`) runs two ``git`` processes
(about 20 ms a tool call here). What it records depends only on the worktree's files and on the
git files that decide which of them count (the index, ``.git/info/exclude``, ``.git/config``).
:func:`fingerprint` digests the ``lstat`` of every entry beneath the workspace (outside the
top-level ``.git``) and of those git files: path, type and mode, size, inode, modification and
status-change times. A write, a ``touch -r`` or a rename changes the status-change time (which a
process cannot set), so an unchanged digest means unchanged files, with two exceptions that
make the digest unusable (None, and the checkpoint is taken):

* an entry whose times are within :data:`RACY_NS` of the scan: file system timestamps advance
  by a clock tick, so a later write in the same tick could leave them as they were (git's
  "racy" entries, issue 17);
* more than :data:`MAX_ENTRIES` entries (a large ignored tree): git, which skips ignored
  directories, is then the cheaper way.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from pathlib import Path

MAX_ENTRIES = 20_000
RACY_NS = 100_000_000  # 0.1 s: far coarser than any timestamp tick of a Linux file system
GIT_FILES = ("index", "info/exclude", "config")


class _Unusable(Exception):
    pass


def _feed(digest: hashlib.blake2b, name: str, st: os.stat_result, since_ns: int) -> None:
    if max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns:
        raise _Unusable(name)
    digest.update(f"{name}\0{st.st_mode}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:"
                  f"{st.st_ctime_ns}\n".encode("utf-8", "surrogateescape"))


def fingerprint(workspace: Path, max_entries: int = MAX_ENTRIES) -> str | None:
    """The digest of the workspace's state as a checkpoint sees it, or None when it cannot
    tell a change apart (see the module's docstring)."""
    since_ns = time.time_ns() - RACY_NS
    digest = hashlib.blake2b(digest_size=20)
    git_dir = workspace / ".git"
    count = 0
    try:
        for name in GIT_FILES:
            try:
                _feed(digest, f".git/{name}", os.lstat(git_dir / name), since_ns)
            except FileNotFoundError:
                digest.update(f".git/{name}\0missing\n".encode())
        pending = [""]
        while pending:
            relative = pending.pop()
            with os.scandir(workspace / relative if relative else workspace) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
            for entry in entries:
                if not relative and entry.name == ".git":
                    continue
                count += 1
                if count > max_entries:
                    return None
                path = f"{relative}/{entry.name}" if relative else entry.name
                st = entry.stat(follow_symlinks=False)
                _feed(digest, path, st, since_ns)
                if stat.S_ISDIR(st.st_mode):
                    pending.append(path)
    except (_Unusable, OSError):
        return None
    return digest.hexdigest()
