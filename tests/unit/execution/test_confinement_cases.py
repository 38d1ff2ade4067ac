"""Table-driven adversarial confinement cases, each run through the dispatcher.

A row names an operation, its arguments, the filesystem it runs on (the base layout of
:mod:`confinement_layouts` plus links, FIFOs and files of its own) and the expected outcome:
refused with a code, or succeeded with so many entries skipped. Every row also proves that nothing
outside the workspace and nothing in ``.git`` was read (no secret in the envelope), written,
listed, moved or deleted (snapshots before and after are equal).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.unit.execution.confinement_layouts import (
    OUTSIDE_SECRET,
    Dir,
    Entry,
    Fifo,
    File,
    Harness,
    Layout,
    Link,
    available_specs,
    build_layout,
    leaked,
)

OK = "ok"
OUTSIDE = "path_outside_workspace"
PROTECTED = "protected_path"
INVALID = "invalid_arguments"
SPECIAL = "unsupported_file_type"

LINKS: dict[str, Entry] = {
    "link_out": Link("../outside/secret.txt"),
    "linkdir": Link("../outside"),
}
NESTED_REPO: dict[str, Entry] = {
    "nested/file.txt": File("n\n"),
    "nested/.git/config": File("[core]\n\tsecret = GIT-INTERNAL-SECRET\n"),
}
STAGE: dict[str, Entry] = {"stage/workflows/ci.yml": File("on: push\n")}
WORKFLOW: dict[str, Entry] = {".github/workflows/ci.yml": File("on: push\n")}

Check = Callable[[Layout, dict[str, Any]], None]


@dataclass(frozen=True)
class Case:
    id: str
    op: str
    args: dict[str, Any]
    expect: str
    layout: dict[str, Entry] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    allow_workflows: bool = False
    git_repo: bool = False
    check: Check | None = None


def absent(rel: str) -> Check:
    def check(layout: Layout, _: dict[str, Any]) -> None:
        assert not os.path.lexists(layout.root / rel)
    return check


def present(rel: str, kind: str = "any") -> Check:
    def check(layout: Layout, _: dict[str, Any]) -> None:
        path = layout.root / rel
        assert os.path.lexists(path)
        if kind == "link":
            assert path.is_symlink()
    return check


def no_secret_in_copy(rel: str) -> Check:
    def check(layout: Layout, _: dict[str, Any]) -> None:
        for directory, _dirs, files in os.walk(layout.root / rel):
            for name in files:
                path = Path(directory) / name
                assert path.is_symlink() or OUTSIDE_SECRET not in path.read_text()
            assert ".git" not in [d.casefold() for d in _dirs]
    return check


def R(id: str, op: str, args: dict[str, Any], expect: str, **kw: Any) -> Case:  # noqa: N802
    return Case(id=id, op=f"workspace.{op}", args=args, expect=expect, **kw)


LONG = "a" * 256
TRAVERSAL = [
    R("dotdot-read", "read_file", {"path": "../outside/secret.txt"}, OUTSIDE),
    R("dotdot-deep", "read_file", {"path": "src/../../outside/secret.txt"}, OUTSIDE),
    R("dotdot-through-missing", "read_file", {"path": "nope/../../outside/secret.txt"}, OUTSIDE),
    R("dotdot-dots", "read_file", {"path": "./././../outside/secret.txt"}, OUTSIDE),
    R("dotdot-write", "write_file", {"path": "../pwn.txt", "content": "x"}, OUTSIDE),
    R("dotdot-list", "list_dir", {"path": "../outside"}, OUTSIDE),
    R("dotdot-inside-ok", "read_file", {"path": "src/../README.md"}, OK),
    R("dotdot-too-many", "read_file", {"path": "../" * 2000}, INVALID),
    R("abs-etc", "read_file", {"path": "/etc/passwd"}, OUTSIDE),
    R("abs-outside", "read_file", {"path": "{outside}/secret.txt"}, OUTSIDE),
    R("abs-root-dotdot", "read_file", {"path": "{root}/../outside/secret.txt"}, OUTSIDE),
    R("abs-root-sibling-prefix", "read_file", {"path": "{root}-evil/secret.txt"}, OUTSIDE),
    R("abs-double-slash", "read_file", {"path": "//etc/passwd"}, OUTSIDE),
    R("abs-inside-read", "read_file", {"path": "{root}/README.md"}, OK),
    R("abs-inside-write", "write_file", {"path": "{root}/new.txt", "content": "x"}, OK,
      check=present("new.txt")),
]

SYMLINKS = [
    R("link-final-read", "read_file", {"path": "link_out"}, OUTSIDE, layout=LINKS),
    R("link-final-write", "write_file", {"path": "link_out", "content": "x"}, OUTSIDE,
      layout=LINKS),
    R("link-final-edit", "edit_file", {"path": "link_out", "old_text": "T", "new_text": "x"},
      OUTSIDE, layout=LINKS),
    R("link-final-stat-is-the-link", "stat", {"path": "link_out"}, OK, layout=LINKS),
    R("link-final-delete-unlinks", "delete_path", {"path": "link_out"}, OK, layout=LINKS,
      check=absent("link_out")),
    R("link-absolute-target", "read_file", {"path": "l"}, OUTSIDE,
      layout={"l": Link("{outside}/secret.txt")}),
    R("link-parent-read", "read_file", {"path": "linkdir/secret.txt"}, OUTSIDE, layout=LINKS),
    R("link-parent-write", "write_file", {"path": "linkdir/pwn.txt", "content": "x"}, OUTSIDE,
      layout=LINKS),
    R("link-parent-mkdir", "make_dir", {"path": "linkdir/newdir"}, OUTSIDE, layout=LINKS),
    R("link-parent-nested", "write_file", {"path": "sub/deep/x", "content": "x"}, OUTSIDE,
      layout={"sub/deep": Link("../../outside/dir")}),
    R("link-chained-out", "read_file", {"path": "a"}, OUTSIDE,
      layout={"a": Link("b"), "b": Link("sub/c"), "sub/c": Link("../../outside/secret.txt")}),
    R("link-chained-in", "read_file", {"path": "a"}, OK,
      layout={"a": Link("b"), "b": Link("sub/c"), "sub/c": Link("../README.md")}),
    R("link-dangling-out-write", "write_file", {"path": "l", "content": "x"}, OUTSIDE,
      layout={"l": Link("../outside/new-file.txt")}),
    R("link-dangling-in-write", "write_file", {"path": "l", "content": "x"}, OK,
      layout={"l": Link("created.txt")}, check=present("created.txt")),
    R("link-loop", "read_file", {"path": "a"}, OUTSIDE, layout={"a": Link("b"), "b": Link("a")}),
    R("link-proc-root", "read_file", {"path": "p/etc/passwd"}, OUTSIDE,
      layout={"p": Link("/proc/self/root")}),
    R("link-proc-cwd", "list_dir", {"path": "p"}, OUTSIDE, layout={"p": Link("/proc/self/cwd")}),
    R("link-abs-inside", "read_file", {"path": "l"}, OK, layout={"l": Link("{root}/README.md")}),
    R("link-dot-then-dotdot", "read_file", {"path": "l/../outside/secret.txt"}, OUTSIDE,
      layout={"l": Link(".")}),
    R("link-climbs-and-reenters", "read_file", {"path": "l"}, OUTSIDE,
      layout={"l": Link("../ws/README.md")}),
]

TEXT = [
    R("nul-read", "read_file", {"path": "README.md\x00.txt"}, INVALID),
    R("nul-write", "write_file", {"path": "a\x00b", "content": "x"}, INVALID),
    R("nul-glob", "glob", {"pattern": "*\x00"}, INVALID),
    R("lone-surrogate", "read_file", {"path": "\ud800"}, INVALID),  # regression: was a crash
    R("file-as-parent", "read_file", {"path": "README.md/x"}, "not_a_directory"),  # regression
    R("proc-self-root", "read_file", {"path": "/proc/self/root/etc/passwd"}, OUTSIDE),
    R("proc-self-cwd", "read_file", {"path": "/proc/self/cwd/README.md"}, OUTSIDE),
    R("proc-environ", "read_file", {"path": "/proc/self/environ"}, OUTSIDE),
    R("proc-list", "list_dir", {"path": "/proc/self/root"}, OUTSIDE),
    R("long-component", "write_file", {"path": LONG, "content": "x"}, INVALID),
    R("long-path", "read_file", {"path": "/".join(["abcdefgh"] * 500)}, INVALID),
    R("component-255-ok", "write_file", {"path": "b" * 255, "content": "x"}, OK),
]

TRAVERSALS = [
    R("glob-dotdot", "glob", {"pattern": "../outside/*"}, INVALID),
    R("glob-absolute", "glob", {"pattern": "/etc/*"}, INVALID),
    R("glob-inner-dotdot", "glob", {"pattern": "src/../../outside/*"}, INVALID),
    R("glob-path-link", "glob", {"pattern": "*", "path": "linkdir"}, OUTSIDE, layout=LINKS),
    R("glob-skips-links", "glob", {"pattern": "**/*"}, OK, layout=LINKS,
      skipped={"skipped_outside": 2, "skipped_protected": 1}),
    R("glob-skips-proc-link", "glob", {"pattern": "**"}, OK,
      layout={"p": Link("/proc/self/root")}, skipped={"skipped_outside": 1}),
    R("search-skips-links", "search", {"pattern": "TOP-SECRET"}, OK, layout=LINKS,
      skipped={"skipped_outside": 2, "skipped_protected": 1, "count": 0}),
    R("search-git-secret", "search", {"pattern": "GIT-INTERNAL"}, OK, layout=NESTED_REPO,
      skipped={"skipped_protected": 2, "count": 0}),
    R("search-path-outside", "search", {"pattern": "x", "path": "../outside"}, OUTSIDE),
    R("search-path-link", "search", {"pattern": "x", "path": "link_out"}, OUTSIDE,
      layout=LINKS),
    R("search-glob-dotdot", "search", {"pattern": "x", "glob": "../*"}, INVALID),
    R("list-skips", "list_dir", {"recursive": True, "include_hidden": True}, OK,
      layout={**LINKS, **NESTED_REPO},
      skipped={"skipped_outside": 2, "skipped_protected": 2}),
    R("list-link-dir", "list_dir", {"path": "linkdir"}, OUTSIDE, layout=LINKS),
    R("list-git", "list_dir", {"path": ".git"}, PROTECTED),
    R("list-chained-dir", "list_dir", {"path": "a"}, OUTSIDE,
      layout={"a": Link("b"), "b": Link("../outside/dir")}),
]

MIXED: dict[str, Entry] = {
    "mixed/ok.txt": File("fine\n"),
    "mixed/evil": Link("../../outside/secret.txt"),
    "mixed/evildir": Link("../../outside"),
    "mixed/proc": Link("/proc/self/root"),
    "mixed/inner": Link("ok.txt"),
}
COPIES = [
    R("copy-link-dir-source", "copy_path", {"source": "linkdir", "destination": "c"}, OUTSIDE,
      layout=LINKS),
    R("copy-skips-escapes", "copy_path", {"source": "mixed", "destination": "c"}, OK,
      layout=MIXED, skipped={"skipped_outside": 3, "files_copied": 1, "symlinks_copied": 1},
      check=no_secret_in_copy("c")),
    R("copy-dest-outside", "copy_path", {"source": "README.md", "destination": "../o.txt"},
      OUTSIDE),
    R("copy-dest-through-link", "copy_path",
      {"source": "README.md", "destination": "linkdir/x.txt"}, OUTSIDE, layout=LINKS),
    R("copy-source-abs-outside", "copy_path",
      {"source": "{outside}/secret.txt", "destination": "stolen.txt"}, OUTSIDE),
    R("copy-source-git", "copy_path", {"source": ".git/config", "destination": "cfg"},
      PROTECTED),
    R("copy-dest-git-hook", "copy_path",
      {"source": "README.md", "destination": ".git/hooks/pre-commit", "overwrite": True},
      PROTECTED),
    R("copy-skips-nested-git", "copy_path", {"source": "nested", "destination": "n2"}, OK,
      layout=NESTED_REPO, skipped={"skipped_protected": 1}, check=no_secret_in_copy("n2")),
    R("copy-dev-null-link", "copy_path", {"source": "dn", "destination": "x"}, OUTSIDE,
      layout={"dn": Link("/dev/null")}),
    R("copy-stage-to-github", "copy_path", {"source": "stage", "destination": ".github"},
      PROTECTED, layout=STAGE, check=absent(".github")),
    R("copy-skips-fifo", "copy_path", {"source": "pipes", "destination": "p2"}, OK,
      layout={"pipes/f": Fifo(), "pipes/a.txt": File("a")}, skipped={"skipped_special": 1}),
]

MOVES = [
    R("move-dest-outside", "move_path", {"source": "README.md", "destination": "../m"},
      OUTSIDE, check=present("README.md")),
    R("move-link-itself", "move_path", {"source": "link_out", "destination": "moved"}, OK,
      layout=LINKS, check=present("moved", "link")),
    R("move-source-outside", "move_path", {"source": "{outside}/secret.txt",
                                           "destination": "x"}, OUTSIDE),
    R("move-root", "move_path", {"source": ".", "destination": "x"}, PROTECTED),
    R("move-root-abs", "move_path", {"source": "{root}", "destination": "x"}, PROTECTED),
    R("move-git", "move_path", {"source": ".git", "destination": "g"}, PROTECTED),
    R("move-into-git", "move_path", {"source": "README.md", "destination": ".git/hooks/post"},
      PROTECTED),
    R("move-nested-repo", "move_path", {"source": "nested", "destination": "n2"}, PROTECTED,
      layout=NESTED_REPO, check=present("nested/file.txt")),  # regression: subtree check
    R("move-dest-through-link", "move_path", {"source": "README.md", "destination": "linkdir/x"},
      OUTSIDE, layout=LINKS),
    R("move-plants-workflows", "move_path", {"source": "stage", "destination": ".github"},
      PROTECTED, layout=STAGE, check=absent(".github")),  # regression: subtree check
    R("move-plants-workflows-allowed", "move_path", {"source": "stage",
                                                     "destination": ".github"}, OK,
      layout=STAGE, allow_workflows=True, check=present(".github/workflows/ci.yml")),
    R("move-away-workflows", "move_path", {"source": ".github", "destination": "gh"},
      PROTECTED, layout=WORKFLOW),
    R("move-over-link-dir", "move_path",
      {"source": "README.md", "destination": "linkdir", "overwrite": True}, OK, layout=LINKS,
      check=present("linkdir")),
]

DELETES = [
    R("delete-outside", "delete_path", {"path": "../outside/secret.txt"}, OUTSIDE),
    R("delete-link-dir-recursive", "delete_path", {"path": "linkdir", "recursive": True}, OK,
      layout=LINKS, check=absent("linkdir")),
    R("delete-through-link", "delete_path", {"path": "linkdir/secret.txt"}, OUTSIDE,
      layout=LINKS),
    R("delete-root", "delete_path", {"path": ".", "recursive": True}, PROTECTED),
    R("delete-root-abs", "delete_path", {"path": "{root}/", "recursive": True}, PROTECTED),
    R("delete-git", "delete_path", {"path": ".git", "recursive": True}, PROTECTED),
    R("delete-git-upper", "delete_path", {"path": ".GIT/config"}, PROTECTED),
    R("delete-nested-repo", "delete_path", {"path": "nested", "recursive": True}, PROTECTED,
      layout=NESTED_REPO),  # regression: subtree check
    R("delete-github", "delete_path", {"path": ".github", "recursive": True}, PROTECTED,
      layout=WORKFLOW, check=present(".github/workflows/ci.yml")),
    R("delete-dir-with-escaping-links", "delete_path", {"path": "mixed", "recursive": True},
      OK, layout=MIXED, check=absent("mixed")),
    R("delete-proc-link", "delete_path", {"path": "p"}, OK,
      layout={"p": Link("/proc/self/root")}, check=absent("p")),
]

GIT_DIR = [
    R("git-read-config", "read_file", {"path": ".git/config"}, PROTECTED),
    R("git-write-hook", "write_file", {"path": ".git/hooks/pre-commit", "content": "x"},
      PROTECTED),
    R("git-write-config", "write_file", {"path": ".git/config", "content": "x"}, PROTECTED),
    R("git-upper-config", "write_file", {"path": ".GIT/config", "content": "x"}, PROTECTED),
    R("git-mixed-case", "read_file", {"path": ".Git/HEAD"}, PROTECTED),
    R("git-nested", "write_file", {"path": "nested/.git/config", "content": "x"}, PROTECTED,
      layout=NESTED_REPO),
    R("git-link-file", "read_file", {"path": "gl"}, PROTECTED, layout={"gl": Link(".git/config")}),
    R("git-link-dir-write", "write_file", {"path": "hooks/post-checkout", "content": "x"},
      PROTECTED, layout={"hooks": Link(".git/hooks")}),
    R("git-edit-head", "edit_file", {"path": ".git/HEAD", "old_text": "main", "new_text": "x"},
      PROTECTED),
    R("git-mkdir", "make_dir", {"path": ".git/hooks/x"}, PROTECTED),
    R("git-abs", "read_file", {"path": "{root}/.git/config"}, PROTECTED),
    R("git-stat", "stat", {"path": ".git"}, PROTECTED),
    R("git-passthrough-dotdot", "read_file", {"path": ".git/../README.md"}, OK),
]

WORKFLOWS = [
    R("wf-write", "write_file", {"path": ".github/workflows/ci.yml", "content": "x"}, PROTECTED),
    R("wf-write-allowed", "write_file", {"path": ".github/workflows/ci.yml", "content": "x"}, OK,
      allow_workflows=True),
    R("wf-case", "write_file", {"path": ".GitHub/Workflows/ci.yml", "content": "x"}, PROTECTED),
    R("wf-edit", "edit_file", {"path": ".github/workflows/ci.yml", "old_text": "push",
                               "new_text": "pull_request_target"}, PROTECTED, layout=WORKFLOW),
    R("wf-read-ok", "read_file", {"path": ".github/workflows/ci.yml"}, OK, layout=WORKFLOW),
    R("wf-through-link", "write_file", {"path": "wf/x.yml", "content": "x"}, PROTECTED,
      layout={"wf": Link(".github/workflows"), ".github/workflows": Dir()}),
    R("wf-mkdir", "make_dir", {"path": ".github/workflows"}, PROTECTED),
    R("wf-copy-over", "copy_path", {"source": "README.md",
                                    "destination": ".github/workflows/x.yml"}, PROTECTED),
]

DEVICES = [
    R("dev-null-link-read", "read_file", {"path": "dn"}, OUTSIDE, layout={"dn": Link("/dev/null")}),
    R("dev-null-link-write", "write_file", {"path": "dn", "content": "x"}, OUTSIDE,
      layout={"dn": Link("/dev/null")}),
    R("dev-abs", "read_file", {"path": "/dev/zero"}, OUTSIDE),
    R("fifo-read", "read_file", {"path": "pipe"}, SPECIAL, layout={"pipe": Fifo()}),
    R("fifo-write", "write_file", {"path": "pipe", "content": "x"}, SPECIAL,
      layout={"pipe": Fifo()}),
    R("fifo-via-link", "read_file", {"path": "pl"}, SPECIAL,
      layout={"pipe": Fifo(), "pl": Link("pipe")}),
    R("fifo-list", "list_dir", {}, OK, layout={"pipe": Fifo()}, skipped={"skipped_special": 1}),
    R("fifo-search", "search", {"pattern": "x"}, OK, layout={"pipe": Fifo()},
      skipped={"skipped_special": 1}),
    R("fifo-copy", "copy_path", {"source": "pipe", "destination": "p2"}, SPECIAL,
      layout={"pipe": Fifo()}),
]

PATCHES = [
    R("patch-dotdot", "apply_patch", {"patch": "--- a/../outside/secret.txt\n+++ "
                                      "b/../outside/secret.txt\n@@ -1 +1 @@\n-x\n+y\n"}, OUTSIDE),
    R("patch-absolute", "apply_patch", {"patch": "--- /dev/null\n+++ /tmp/studio-pwn\n"
                                        "@@ -0,0 +1 @@\n+x\n"}, OUTSIDE),
    R("patch-link", "apply_patch", {"patch": "--- a/link_out\n+++ b/link_out\n@@ -1 +1 @@\n"
                                    f"-{OUTSIDE_SECRET}\n+owned\n"}, OUTSIDE, layout=LINKS),
    R("patch-through-link-dir", "apply_patch", {"patch": "--- /dev/null\n+++ b/linkdir/n\n"
                                                "@@ -0,0 +1 @@\n+x\n"}, OUTSIDE, layout=LINKS),
    R("patch-git-config", "apply_patch", {"patch": "--- /dev/null\n+++ b/.git/hooks/post\n"
                                          "@@ -0,0 +1 @@\n+x\n"}, PROTECTED),
    R("patch-workflow", "apply_patch", {"patch": "--- /dev/null\n+++ b/.github/workflows/x\n"
                                        "@@ -0,0 +1 @@\n+x\n"}, PROTECTED),
    R("patch-atomic-second-escapes", "apply_patch",
      {"patch": "--- /dev/null\n+++ b/first.txt\n@@ -0,0 +1 @@\n+x\n"
                "--- /dev/null\n+++ b/../escape.txt\n@@ -0,0 +1 @@\n+x\n"}, OUTSIDE,
      check=absent("first.txt")),
    R("patch-rename-out", "apply_patch",
      {"patch": "diff --git a/README.md b/x\nrename from README.md\nrename to ../x\n"}, OUTSIDE,
      check=present("README.md")),
]


def command_rows() -> list[Case]:
    names = {spec.name for spec in available_specs()}
    rows: list[Case] = []
    if "command_run" in names:
        def run(id: str, cwd: str, expect: str, **kw: Any) -> Case:
            return Case(id=id, op="command.run", args={"argv": ["touch", "ran"], "cwd": cwd},
                        expect=expect, check=absent("ran") if expect != OK else None, **kw)
        rows += [
            run("cmd-cwd-dotdot", "../outside", OUTSIDE),
            run("cmd-cwd-etc", "/etc", OUTSIDE),
            run("cmd-cwd-link", "linkdir", OUTSIDE, layout=LINKS),
            run("cmd-cwd-proc", "/proc/self/cwd", OUTSIDE),
            run("cmd-cwd-git", ".git/hooks", PROTECTED),
            run("cmd-cwd-nul", "src\x00", INVALID),
            run("cmd-cwd-inside", "src", OK),
        ]
    if "git_diff" in names:
        def git(id: str, op: str, args: dict[str, Any], expect: str) -> Case:
            return Case(id=id, op=f"git.{op}", args=args, expect=expect, git_repo=True)
        rows += [
            git("git-diff-output-option", "diff", {"paths": ["--output=/tmp/studio-x"]}, INVALID),
            git("git-diff-path-outside", "diff", {"paths": ["../outside/secret.txt"]}, OUTSIDE),
            git("git-diff-ref-option", "diff", {"ref": "--output=/tmp/studio-x"}, INVALID),
            git("git-checkout-orphan", "checkout", {"ref": "--orphan=x"}, INVALID),
            git("git-branch-force", "create_branch", {"name": "-f"}, INVALID),
            git("git-show-option", "show", {"ref": "--output=/tmp/studio-x"}, INVALID),
            git("git-add-outside", "add", {"paths": ["../outside/secret.txt"]}, OUTSIDE),
            git("git-add-git", "add", {"paths": [".git/config"]}, PROTECTED),
            git("git-restore-option", "restore", {"paths": ["--source=HEAD~1"]}, INVALID),
            git("git-log-upload-pack", "log", {"ref": "--upload-pack=touch /tmp/studio-x"},
                INVALID),
        ]
    return rows


CASES = [*TRAVERSAL, *SYMLINKS, *TEXT, *TRAVERSALS, *COPIES, *MOVES, *DELETES, *GIT_DIR,
         *WORKFLOWS, *DEVICES, *PATCHES, *command_rows()]


def test_there_are_enough_distinct_cases() -> None:
    ids = [case.id for case in CASES]
    assert len(ids) == len(set(ids))
    assert len([c for c in CASES if c.op.startswith("workspace.")]) >= 60


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_confinement_case(case: Case, tmp_path: Path) -> None:
    layout = build_layout(tmp_path / "case", case.layout, git_repo=case.git_repo)
    harness = Harness(layout, allow_workflows=case.allow_workflows)
    before = layout.guarded()

    envelope = harness.call(case.op, layout.expand_args(case.args))

    if case.expect == OK:
        assert envelope["ok"], envelope
        result = envelope["result"]
        for key, count in case.skipped.items():
            assert result[key] == count, (key, result)
    else:
        assert not envelope["ok"], envelope
        assert envelope["error"]["code"] == case.expect, envelope["error"]
    assert leaked(envelope) == []
    assert layout.guarded() == before
    assert not os.path.lexists("/tmp/studio-x") and not os.path.lexists("/tmp/studio-pwn")
    if case.check is not None:
        case.check(layout, envelope)
