"""Workspace checkpoints against real git: a checkpoint never records less than the worktree holds.

The regression behind a lost edit reported as success (issue 17): the checkpoint staged the
worktree into a *copy* of the agent's index. An edit made in the same second as the index was
written (a fresh clone, a fast model), in place and of the same size (``a - b`` -> ``a + b``),
leaves the file's stat data (seconds, size, inode) equal to the index entry's. Git then trusts the
stat data unless the entry is "racy" (modified no earlier than the index file itself). The copy
carried a new modification time, so once a second had passed the entry no longer looked racy, git
skipped the file, and the checkpoint came out empty: the resumed attempt restored nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from services.execution.tool_domains.git.runner import GitAuthor
from services.runs.checkpoints import take_checkpoint
from tests.integration.workspace_fixtures import plain_git

AUTHOR = GitAuthor("Checkpoint Test", "checkpoint@studio.invalid")
BASE = b"def add(a, b):\n    return a - b\n"
FIXED = b"def add(a, b):\n    return a + b\n"


def _write_in_place(path: Path, data: bytes) -> None:
    """What ``workspace.edit_file`` does: the same inode, truncated and rewritten."""
    with path.open("r+b") as handle:
        handle.truncate(0)
        handle.write(data)


def _same_second_edit(repo: Path) -> str:
    """A committed ``calc.py`` whose index entry and in-place edit share one second of mtime and
    ctime (retried until they do, however loaded the machine); answers the base commit."""
    plain_git(repo, "init", "-q", "-b", "main")
    calc = repo / "calc.py"
    calc.write_bytes(BASE)
    plain_git(repo, "add", ".")
    plain_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    base = plain_git(repo, "rev-parse", "HEAD")
    for _ in range(50):
        while time.time() % 1 > 0.3:  # start at the beginning of a second
            time.sleep(0.01)
        _write_in_place(calc, BASE)
        entry = calc.stat()
        (repo / ".git" / "index").unlink()
        plain_git(repo, "reset", "-q")  # the index entry takes calc.py's stat data now
        _write_in_place(calc, FIXED)
        index, edited = (repo / ".git" / "index").stat(), calc.stat()
        seconds = {int(s) for s in (entry.st_mtime, entry.st_ctime, index.st_mtime,
                                    edited.st_mtime, edited.st_ctime)}
        if len(seconds) == 1:
            return base
    raise AssertionError("could not edit within the second the index was written")


def test_an_edit_in_the_second_of_the_clone_is_in_every_later_checkpoint(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    base = _same_second_edit(repo)

    first = take_checkpoint(repo, base, AUTHOR)
    assert first.patch is not None and b"+    return a + b" in first.patch

    written = (repo / ".git" / "index").stat().st_mtime
    while time.time() < written + 1.5:  # the next checkpoint comes seconds later (a command ran)
        time.sleep(0.1)
    later = take_checkpoint(repo, base, AUTHOR)

    assert later.size_bytes == first.size_bytes and later.patch == first.patch
    assert (repo / "calc.py").read_bytes() == FIXED
    # The agent's own index was not touched by either checkpoint.
    assert plain_git(repo, "diff", "--cached", "--name-only") == ""
    assert os.path.getmtime(repo / ".git" / "index") == written
