"""Issue 12d: a tool call that left the workspace as it was takes no checkpoint (no ``git`` run).

The store compares the workspace's fingerprint (the ``lstat`` of every entry and of the git files
that decide what a checkpoint holds) with the one of its last checkpoint. Every kind of change a
command can make must still be seen: a new, removed or renamed file, an in-place same-size edit
even with its modification time put back (``touch -r``), a change to the index or to
``.git/info/exclude``; and a change too recent to be told apart by timestamps is never trusted.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from services.db.redaction import Redactor
from services.db.session import Database, create_db_engine
from services.execution.tool_domains.git.runner import GitAuthor
from services.runs.checkpoints import CheckpointingToolStore
from services.runs.workspace_fingerprint import RACY_NS, fingerprint
from tests.integration.workspace_fixtures import plain_git

AUTHOR = GitAuthor("Checkpoint Test", "checkpoint@studio.invalid")
SETTLE_S = RACY_NS / 1e9 + 0.05


def _repo(root: Path) -> tuple[Path, str]:
    repo = root / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "calc.py").write_bytes(b"return a - b\n")
    (repo / "README").write_text("hello\n")
    plain_git(repo, "init", "-q", "-b", "main")
    plain_git(repo, "add", ".")
    plain_git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    time.sleep(SETTLE_S)
    return repo, plain_git(repo, "rev-parse", "HEAD")


def _store(tmp_path: Path, repo: Path, base: str) -> CheckpointingToolStore:
    db = Database(create_db_engine(f"sqlite:///{tmp_path / 'unused.db'}"))
    return CheckpointingToolStore(db, workspace=repo, base_commit=base, epoch=1, author=AUTHOR,
                                  redactor=Redactor())


def _same_size_edit_with_old_mtime(repo: Path) -> None:
    calc = repo / "pkg" / "calc.py"
    before = calc.stat()
    with calc.open("r+b") as handle:
        handle.write(b"return a + b\n")
    os.utime(calc, ns=(before.st_atime_ns, before.st_mtime_ns))


CHANGES: dict[str, Callable[[Path], None]] = {
    "new file": lambda repo: (repo / "pkg" / "new.py").write_text("x\n"),
    "removed file": lambda repo: (repo / "README").unlink(),
    "renamed file": lambda repo: (repo / "README").rename(repo / "READ"),
    "same-size edit, mtime put back": _same_size_edit_with_old_mtime,
    "index": lambda repo: plain_git(repo, "rm", "-q", "--cached", "README"),
    "exclude": lambda repo: (repo / ".git" / "info" / "exclude").write_text("README\n"),
    "nested directory": lambda repo: (repo / "pkg" / "deep").mkdir(),
}


def test_an_unchanged_workspace_takes_no_checkpoint(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    store = _store(tmp_path, repo, base)
    (repo / "pkg" / "calc.py").write_bytes(b"return a + b\n")
    time.sleep(SETTLE_S)
    first = store._checkpoint("e")
    assert first is not None and first.patch is not None and b"+return a + b" in first.patch
    store.last_sha256 = first.sha256
    for _ in range(3):  # commands that changed nothing (``true``, ``ls``)
        assert store._checkpoint("e") is None
    assert store.skipped == 3


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_is_seen(tmp_path: Path, change: str) -> None:
    repo, base = _repo(tmp_path)
    before = fingerprint(repo)
    assert before is not None and fingerprint(repo) == before
    CHANGES[change](repo)
    time.sleep(SETTLE_S)
    after = fingerprint(repo)
    assert after is not None and after != before


def test_a_change_too_recent_is_not_trusted(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    store = _store(tmp_path, repo, base)
    (repo / "README").write_text("HELLO\n")  # now: within the timestamp's uncertainty
    assert fingerprint(repo) is None
    first = store._checkpoint("e")
    assert first is not None and first.patch is not None and b"+HELLO" in first.patch
    store.last_sha256 = first.sha256
    (repo / "README").write_text("HALLO\n")  # the same size, maybe the same tick
    second = store._checkpoint("e")  # git ran again and saw the edit
    assert second is not None and second.patch is not None and b"+HALLO" in second.patch
    assert store.skipped == 0


def test_a_large_tree_falls_back_to_git(tmp_path: Path) -> None:
    repo, _ = _repo(tmp_path)
    assert fingerprint(repo, max_entries=2) is None
    assert fingerprint(repo) is not None


def test_a_command_that_only_reads_takes_no_checkpoint(tmp_path: Path) -> None:
    repo, base = _repo(tmp_path)
    store = _store(tmp_path, repo, base)
    first = store._checkpoint("e")  # the first call: git runs, nothing changed yet
    assert first is not None and first.patch == b""
    store.last_sha256 = first.sha256
    subprocess.run(["cat", "README"], cwd=repo, check=True, capture_output=True)
    assert store._checkpoint("e") is None and store.skipped == 1
    (repo / "README").write_text("edited\n")
    time.sleep(SETTLE_S)
    assert store._checkpoint("e") is not None
