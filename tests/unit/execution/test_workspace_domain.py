"""Functional tests of every workspace operation, through the dispatcher and its envelopes."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.workspace import tools as workspace
from services.execution.tool_domains.workspace.io import MAX_FILE_BYTES
from tests.unit.execution.workspace_helpers import Workspace


@pytest.fixture
def ws(workspace: Path) -> Workspace:
    (workspace / "notes.txt").write_text("one\ntwo\nthree\n")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("def main():\n    return 1\n")
    (workspace / "src" / "util.py").write_text("X = 1\nY = 2\n")
    (workspace / ".hidden").write_text("h\n")
    return Workspace(workspace)


def test_specs_cover_the_spec_operations() -> None:
    names = {spec.operation for spec in workspace.SPECS}
    assert names == {"read_file", "write_file", "edit_file", "apply_patch", "list_dir", "glob",
                     "search", "delete_path", "move_path", "copy_path", "make_dir", "stat"}
    for spec in workspace.SPECS:
        assert spec.neutral_schema()["additionalProperties"] is False
        assert spec.mutates == (spec.operation not in {"read_file", "list_dir", "glob",
                                                        "search", "stat"})


def test_read_file_window(ws: Workspace) -> None:
    result = ws.ok("read_file", path="notes.txt", offset=2, limit=1)
    assert result == {"path": "notes.txt", "content": "     2\ttwo", "offset": 2,
                      "lines_returned": 1, "total_lines": 3, "truncated": True}
    whole = ws.ok("read_file", path="./notes.txt")
    assert whole["content"].splitlines()[2] == "     3\tthree"
    assert whole["truncated"] is False


def test_read_file_refusals(ws: Workspace) -> None:
    assert ws.error("read_file", path="missing.txt") == "path_not_found"
    assert ws.error("read_file", path="src") == "not_a_file"
    assert ws.error("read_file", path="notes.txt", offset=0) == "invalid_arguments"
    (ws.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert ws.error("read_file", path="blob.bin") == "file_too_large"
    with open(ws.root / "huge.txt", "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)
    assert ws.error("read_file", path="huge.txt") == "file_too_large"


def test_write_file_creates_parents_and_reports(ws: Workspace) -> None:
    created = ws.ok("write_file", path="a/b/c.txt", content="héllo")
    assert created == {"path": "a/b/c.txt", "bytes_written": 6, "created": True,
                       "overwritten": False}
    again = ws.ok("write_file", path="a/b/c.txt", content="x")
    assert again["overwritten"] is True and again["created"] is False
    assert (ws.root / "a/b/c.txt").read_text() == "x"
    assert ws.error("write_file", path="src", content="x") == "not_a_file"
    assert ws.error("write_file", path="notes.txt/x", content="x") == "not_a_directory"


def test_edit_file(ws: Workspace) -> None:
    assert ws.ok("edit_file", path="src/util.py", old_text="Y = 2",
                 new_text="Y = 3")["replacements"] == 1
    assert (ws.root / "src/util.py").read_text() == "X = 1\nY = 3\n"
    assert ws.error("edit_file", path="src/util.py", old_text="Z", new_text="") == "edit_no_match"
    assert ws.error("edit_file", path="src/util.py", old_text=" = ",
                    new_text="=") == "edit_ambiguous"
    assert ws.ok("edit_file", path="src/util.py", old_text=" = ", new_text="=",
                 replace_all=True)["replacements"] == 2
    assert (ws.root / "src/util.py").read_text() == "X=1\nY=3\n"


def test_edit_keeps_invalid_utf8_bytes(ws: Workspace) -> None:
    (ws.root / "latin.txt").write_bytes(b"caf\xe9 = 1\n")
    ws.ok("edit_file", path="latin.txt", old_text="= 1", new_text="= 2")
    assert (ws.root / "latin.txt").read_bytes() == b"caf\xe9 = 2\n"


PATCH = """diff --git a/notes.txt b/notes.txt
--- a/notes.txt
+++ b/notes.txt
@@ -1,3 +1,3 @@
 one
-two
+TWO
 three
diff --git a/new/file.txt b/new/file.txt
new file mode 100644
--- /dev/null
+++ b/new/file.txt
@@ -0,0 +1,2 @@
+alpha
+beta
\\ No newline at end of file
diff --git a/src/util.py b/src/util.py
deleted file mode 100644
--- a/src/util.py
+++ /dev/null
@@ -1,2 +0,0 @@
-X = 1
-Y = 2
"""


def test_apply_patch_modifies_creates_deletes(ws: Workspace) -> None:
    result = ws.ok("apply_patch", patch=PATCH)
    assert result["changed"] == ["new/file.txt", "notes.txt"]
    assert result["deleted"] == ["src/util.py"]
    assert result["hunks_applied"] == 3
    assert (ws.root / "notes.txt").read_text() == "one\nTWO\nthree\n"
    assert (ws.root / "new/file.txt").read_text() == "alpha\nbeta"
    assert not (ws.root / "src/util.py").exists()


def test_apply_patch_plain_diff_with_offset_and_rename(ws: Workspace) -> None:
    (ws.root / "notes.txt").write_text("zero\none\ntwo\nthree\n")
    plain = "--- notes.txt\n+++ notes.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\n"
    ws.ok("apply_patch", patch=plain)
    assert (ws.root / "notes.txt").read_text() == "zero\none\n2\nthree\n"
    rename = ("diff --git a/src/main.py b/src/entry.py\nsimilarity index 100%\n"
              "rename from src/main.py\nrename to src/entry.py\n")
    ws.ok("apply_patch", patch=rename)
    assert (ws.root / "src/entry.py").read_text().startswith("def main")
    assert not (ws.root / "src/main.py").exists()


def test_apply_patch_is_atomic(ws: Workspace) -> None:
    bad = PATCH.replace("-Y = 2", "-Y = 999")
    assert ws.error("apply_patch", patch=bad) == "patch_failed"
    assert (ws.root / "notes.txt").read_text() == "one\ntwo\nthree\n"
    assert not (ws.root / "new").exists()
    assert (ws.root / "src/util.py").exists()
    assert ws.error("apply_patch", patch="not a diff") == "patch_failed"
    exists = "--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+x\n"
    assert ws.error("apply_patch", patch=exists) == "patch_failed"
    assert not [p for p in os.listdir(ws.root) if p.startswith(".studio-patch-")]


def test_list_dir(ws: Workspace) -> None:
    top = ws.ok("list_dir")
    assert [e["path"] for e in top["entries"]] == ["notes.txt", "src"]
    hidden = ws.ok("list_dir", include_hidden=True)
    assert ".hidden" in [e["path"] for e in hidden["entries"]]
    deep = ws.ok("list_dir", recursive=True)
    assert {"path": "src/main.py", "kind": "file", "size": 25} in deep["entries"]
    assert deep["skipped_outside"] == 0
    assert ws.error("list_dir", path="notes.txt") == "not_a_directory"
    assert ws.error("list_dir", path="nope") == "path_not_found"


def test_glob(ws: Workspace) -> None:
    assert [m["path"] for m in ws.ok("glob", pattern="**/*.py")["matches"]] == [
        "src/main.py", "src/util.py"]
    assert [m["path"] for m in ws.ok("glob", pattern="*.txt")["matches"]] == ["notes.txt"]
    assert [m["path"] for m in ws.ok("glob", pattern="m?in.{py,rs}", path="src")["matches"]] \
        == ["src/main.py"]
    assert [m["path"] for m in ws.ok("glob", pattern="[!m]*.py", path="src")["matches"]] \
        == ["src/util.py"]
    assert ws.error("glob", pattern="../*") == "invalid_arguments"
    assert ws.error("glob", pattern="/etc/*") == "invalid_arguments"


def test_search(ws: Workspace) -> None:
    found = ws.ok("search", pattern=r"def \w+")
    assert found["matches"] == [{"path": "src/main.py", "line": 1, "text": "def main():"}]
    literal = ws.ok("search", pattern="X = 1", regex=False, glob="*.py")
    assert [m["path"] for m in literal["matches"]] == ["src/util.py"]
    (ws.root / "blob.bin").write_bytes(b"two\x00")
    capped = ws.ok("search", pattern="e", max_results=2)
    assert capped["count"] == 2 and capped["truncated"] is True
    binary = ws.ok("search", pattern="two")
    assert binary["skipped_binary"] == 1
    assert [m["path"] for m in binary["matches"]] == ["notes.txt"]
    assert ws.ok("search", pattern="three", path="notes.txt")["count"] == 1
    assert ws.error("search", pattern="(") == "invalid_arguments"


def test_delete_path(ws: Workspace) -> None:
    assert ws.ok("delete_path", path="notes.txt")["kind"] == "file"
    assert ws.error("delete_path", path="src") == "invalid_arguments"
    assert ws.ok("delete_path", path="src", recursive=True)["entries_removed"] == 3
    assert not (ws.root / "src").exists()
    assert ws.error("delete_path", path="src") == "path_not_found"
    assert ws.error("delete_path", path=".", recursive=True) == "protected_path"
    ws.ok("make_dir", path="empty")
    assert ws.ok("delete_path", path="empty")["kind"] == "dir"


def test_move_path(ws: Workspace) -> None:
    moved = ws.ok("move_path", source="notes.txt", destination="docs/notes.md")
    assert moved == {"source": "notes.txt", "destination": "docs/notes.md", "kind": "file",
                     "overwritten": False}
    assert (ws.root / "docs/notes.md").read_text().startswith("one")
    assert ws.error("move_path", source="src/main.py", destination="src/util.py") == "path_exists"
    assert ws.ok("move_path", source="src/main.py", destination="src/util.py",
                 overwrite=True)["overwritten"] is True
    assert ws.error("move_path", source="src", destination="src/inner") == "invalid_arguments"
    assert ws.error("move_path", source="docs/notes.md", destination="docs",
                    overwrite=True) == "invalid_arguments"
    assert ws.error("move_path", source=".", destination="x") == "protected_path"


def test_copy_path(ws: Workspace) -> None:
    os.symlink("main.py", ws.root / "src" / "alias.py")
    copied = ws.ok("copy_path", source="src", destination="lib/src")
    assert copied["files_copied"] == 2 and copied["symlinks_copied"] == 1
    assert (ws.root / "lib/src/util.py").read_text() == "X = 1\nY = 2\n"
    assert os.path.realpath(ws.root / "lib/src/alias.py") == str(ws.root / "src" / "main.py")
    assert ws.ok("copy_path", source="notes.txt", destination="n2.txt")["bytes_copied"] == 14
    assert ws.error("copy_path", source="notes.txt", destination="n2.txt") == "path_exists"
    ws.ok("copy_path", source="src/util.py", destination="n2.txt", overwrite=True)
    assert (ws.root / "n2.txt").read_text() == "X = 1\nY = 2\n"
    assert ws.error("copy_path", source="src", destination="src/again") == "invalid_arguments"
    assert ws.error("copy_path", source="missing", destination="x") == "path_not_found"


def test_make_dir_and_stat(ws: Workspace) -> None:
    assert ws.ok("make_dir", path="a/b/c") == {"path": "a/b/c", "created": True}
    assert ws.ok("make_dir", path="a/b/c")["created"] is False
    assert ws.error("make_dir", path="notes.txt") == "path_exists"
    info = ws.ok("stat", path="notes.txt")
    assert info["kind"] == "file" and info["size"] == 14 and info["is_symlink"] is False
    os.symlink("notes.txt", ws.root / "link")
    link = ws.ok("stat", path="link")
    assert link["kind"] == "symlink" and link["link_target"] == "notes.txt"
    assert ws.ok("stat", path=".")["kind"] == "dir"
    assert ws.error("stat", path="nope") == "path_not_found"


def test_workflows_allowed_when_the_execution_allows(workspace: Path) -> None:
    strict = Workspace(workspace)
    assert strict.error("write_file", path=".github/workflows/ci.yml",
                        content="on: push\n") == "protected_path"
    allowed = Workspace(workspace, allow_workflows=True)
    assert allowed.ok("write_file", path=".github/workflows/ci.yml", content="on: push\n")[
        "created"] is True


def test_unknown_argument_is_refused(ws: Workspace) -> None:
    assert ws.error("read_file", path="notes.txt", follow=True) == "invalid_arguments"


def test_idempotent_replay_does_not_repeat(ws: Workspace) -> None:
    call = ws.dispatcher.normalize("same", "workspace.write_file",
                                   {"path": "once.txt", "content": "1"})
    first = ws.dispatcher.dispatch(call, ws.ctx)
    (ws.root / "once.txt").unlink()
    second = ws.dispatcher.dispatch(call, ws.ctx)
    assert first == second and not (ws.root / "once.txt").exists()


def test_copy_path_never_carries_set_id_bits(ws: Workspace) -> None:
    """A set-user-ID copy would run as its owner (the harness, root in CI) for anyone."""
    tool = ws.root / "tool"
    tool.write_bytes(b"#!/bin/sh\n")
    os.chmod(tool, 0o6755)
    ws.ok("copy_path", source="tool", destination="copy")
    os.makedirs(ws.root / "d")
    os.rename(tool, ws.root / "d" / "tool")
    ws.ok("copy_path", source="d", destination="d2")
    for copy in (ws.root / "copy", ws.root / "d2" / "tool"):
        assert oct(copy.stat().st_mode & 0o7777) == oct(0o755)


def test_copy_of_a_sparse_file_is_refused_before_writing(ws: Workspace) -> None:
    """``truncate -s 1T`` then copy_path once filled the disk: holes become real blocks."""
    with open(ws.root / "sparse.bin", "wb") as handle:
        handle.truncate(1024**4)
    assert ws.error("copy_path", source="sparse.bin", destination="copy.bin") == "file_too_large"
    assert not (ws.root / "copy.bin").exists()
    (ws.root / "tree").mkdir()
    os.rename(ws.root / "sparse.bin", ws.root / "tree" / "sparse.bin")
    assert ws.error("copy_path", source="tree", destination="tree2") == "file_too_large"
    assert not (ws.root / "tree2").exists()


def test_the_copy_cap_and_the_disk_check_come_first(workspace: Path) -> None:
    (workspace / "five.txt").write_text("12345")
    small = Workspace(workspace)
    small.ctx = dataclasses.replace(small.ctx, max_copy_bytes=4)
    assert small.error("copy_path", source="five.txt", destination="c.txt") == "file_too_large"
    seen: list[int] = []

    def refuse(planned: int) -> None:
        seen.append(planned)
        raise ToolFailure(ErrorCode.BUDGET_EXCEEDED, "over the workspace's disk cap")

    guarded = Workspace(workspace)
    guarded.ctx = dataclasses.replace(guarded.ctx, disk_check=refuse)
    assert guarded.error("write_file", path="w.txt", content="abc") == "budget_exceeded"
    assert guarded.error("copy_path", source="five.txt", destination="c.txt") == "budget_exceeded"
    assert seen == [3, 5]
    assert not (workspace / "w.txt").exists() and not (workspace / "c.txt").exists()
