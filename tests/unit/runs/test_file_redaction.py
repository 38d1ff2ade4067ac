"""Redacting a tree a model could write (the legacy CLI's home): secrets out of its own files,
nothing outside it ever read or written, whatever the model planted.

The witness of each hostile case is a host file outside the tree holding a secret: it must keep
its content; the positive control is a file of the tree with the same secret, redacted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.db.redaction import REDACTED, Redactor
from services.runs import file_redaction
from services.runs.file_redaction import redact_tree

SECRET = "ghs_0123456789abcdefSECRET"
LINE = f"STUDIO_GITHUB_TOKEN={SECRET}\n"


@pytest.fixture
def redactor() -> Redactor:
    return Redactor([SECRET])


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    host = tmp_path / "host"
    host.mkdir()
    (host / "deploy.env").write_text(LINE)
    return host


@pytest.fixture
def home(tmp_path: Path) -> Path:
    tree = tmp_path / "home"
    (tree / ".cli" / "sessions").mkdir(parents=True)
    (tree / ".cli" / "sessions" / "log.jsonl").write_text(LINE)  # the positive control
    return tree


def _control_redacted(home: Path) -> None:
    assert (home / ".cli" / "sessions" / "log.jsonl").read_text() == \
        f"STUDIO_GITHUB_TOKEN={REDACTED}\n"


def test_links_to_files_and_directories_outside_are_removed_not_followed(
        home: Path, outside: Path, redactor: Redactor) -> None:
    (home / "file-link").symlink_to(outside / "deploy.env")
    (home / ".cli" / "dir-link").symlink_to(outside)
    (home / "dangling").symlink_to(outside / "missing")
    redact_tree(home, redactor)
    assert (outside / "deploy.env").read_text() == LINE
    assert not any(os.path.lexists(home / n) for n in ("file-link", "dangling"))
    assert not os.path.lexists(home / ".cli" / "dir-link")
    _control_redacted(home)


def test_a_hard_link_to_an_outside_file_keeps_that_file_intact(
        home: Path, outside: Path, redactor: Redactor) -> None:
    os.link(outside / "deploy.env", home / "hard.env")
    redact_tree(home, redactor)
    assert (outside / "deploy.env").read_text() == LINE  # a new inode took the name
    assert (home / "hard.env").read_text() == f"STUDIO_GITHUB_TOKEN={REDACTED}\n"
    _control_redacted(home)


def test_a_root_that_is_a_link_is_left_alone(tmp_path: Path, outside: Path,
                                             redactor: Redactor) -> None:
    root = tmp_path / "home-link"
    root.symlink_to(outside)
    redact_tree(root, redactor)
    assert (outside / "deploy.env").read_text() == LINE
    redact_tree(tmp_path / "missing", redactor)  # nothing there: nothing done


def test_fifos_and_files_over_the_cap_are_removed_unread(
        home: Path, redactor: Redactor, monkeypatch: pytest.MonkeyPatch) -> None:
    os.mkfifo(home / "pipe")  # opening it for reading would block the harness
    monkeypatch.setattr(file_redaction, "MAX_FILE_BYTES", 1024)
    (home / "big.log").write_text(LINE + "x" * 2048)
    redact_tree(home, redactor)
    assert not os.path.lexists(home / "pipe") and not (home / "big.log").exists()
    _control_redacted(home)


def test_a_tree_deeper_than_the_bound_is_cut(home: Path, redactor: Redactor,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_redaction, "MAX_DEPTH", 3)
    deep = home / "a" / "b" / "c" / "d"
    deep.mkdir(parents=True)
    (deep / "x.env").write_text(LINE)
    redact_tree(home, redactor)
    assert not (home / "a" / "b" / "c").exists()
    assert SECRET not in "".join(p.read_text() for p in home.rglob("*") if p.is_file())
    _control_redacted(home)


def test_an_unchanged_file_is_not_rewritten(home: Path, redactor: Redactor) -> None:
    clean = home / "clean.json"
    clean.write_text("{}")
    before = os.stat(clean).st_ino
    redact_tree(home, redactor)
    assert os.stat(clean).st_ino == before
