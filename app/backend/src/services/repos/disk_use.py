"""What a workspace holds itself on disk, as an operator reads it.

A clone made through the mirror cache borrows its history (``.git/objects/info/alternates``
names the mirror's object directory): its own disk use is then its checkout plus an index, refs
and config, whatever the depth of the history. :func:`measure` tells the two apart, so that
``studio executions show`` and the run page can say how much an execution's workspace takes and
whether its objects are shared or copied.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class DiskUse:
    """``own_bytes``: the execution's directory (the borrowed objects not counted: they are
    the mirror's); ``checkout_bytes``: the files outside ``.git``; ``borrows_mirror``: whether
    the clone's history is borrowed rather than held."""

    own_bytes: int
    checkout_bytes: int
    borrows_mirror: bool

    def to_json(self) -> dict[str, int | bool]:
        return {"own_bytes": self.own_bytes, "checkout_bytes": self.checkout_bytes,
                "borrows_mirror": self.borrows_mirror}


def borrows(clone: Path) -> bool:
    """Whether the clone at ``clone`` names an object directory to borrow from."""
    alternates = clone / ".git" / "objects" / "info" / "alternates"
    try:
        return any(line.strip() and not line.startswith("#")
                   for line in alternates.read_text().splitlines())
    except (FileNotFoundError, NotADirectoryError):
        return False


def measure(root: Path, clone: Path) -> DiskUse:
    """The disk use of the execution directory ``root`` holding the clone ``clone``, in one
    walk (symbolic links are not followed, so the borrowed objects are not counted)."""
    own = checkout = 0
    git_dir, clone_dir = str(clone / ".git"), str(clone)
    for dirpath, _dirs, files in os.walk(root):
        in_checkout = _under(dirpath, clone_dir) and not _under(dirpath, git_dir)
        for name in files:
            with contextlib.suppress(OSError):
                size = os.lstat(os.path.join(dirpath, name)).st_size
                own += size
                if in_checkout:
                    checkout += size
    return DiskUse(own, checkout, borrows(clone))


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory + os.sep)
