"""Filesystem layouts for the confinement tests: a workspace, an ``outside`` directory holding a
secret next to it, a ``.git`` directory holding another, and whatever links, FIFOs and files a case
adds. Snapshots of everything that is not the workspace (and of ``.git``) prove that a call read,
wrote, listed, moved or deleted nothing it should not have.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import stat
import subprocess
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.execution.envelope import Envelope, envelope_to_json
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.spec import ToolSpec
from services.execution.tool_domains.workspace import tools as workspace

OUTSIDE_SECRET = "TOP-SECRET-OUTSIDE"
GIT_SECRET = "GIT-INTERNAL-SECRET"
SECRETS = (OUTSIDE_SECRET, GIT_SECRET)


@dataclass(frozen=True)
class File:
    content: str = ""


@dataclass(frozen=True)
class Dir:
    pass


@dataclass(frozen=True)
class Link:
    """A symlink; ``{root}`` and ``{outside}`` in the target are replaced by the real paths."""

    target: str


@dataclass(frozen=True)
class Fifo:
    pass


Entry = File | Dir | Link | Fifo

BASE_WORKSPACE: dict[str, Entry] = {
    "README.md": File("hello\nworld\n"),
    "src/app.py": File("print('hi')\n"),
    "sub/inner.txt": File("inner\n"),
    ".git/HEAD": File("ref: refs/heads/main\n"),
    ".git/config": File(f"[core]\n\tsecret = {GIT_SECRET}\n"),
    ".git/hooks/pre-commit": File(f"#!/bin/sh\necho {GIT_SECRET}\n"),
}

BASE_OUTSIDE: dict[str, Entry] = {
    "secret.txt": File(f"{OUTSIDE_SECRET}\n"),
    "dir/nested.txt": File(f"{OUTSIDE_SECRET} nested\n"),
}


@dataclass
class Layout:
    """A built layout under ``base``: ``base/ws`` is the workspace, ``base/outside`` its sibling."""

    base: Path
    root: Path
    outside: Path

    def expand(self, text: str) -> str:
        return text.replace("{root}", str(self.root)).replace("{outside}", str(self.outside))

    def expand_args(self, args: Mapping[str, Any]) -> dict[str, Any]:
        return {k: self.expand(v) if isinstance(v, str) else v for k, v in args.items()}

    def guarded(self) -> dict[str, tuple[Any, ...]]:
        """Everything that is not the workspace, plus the workspace's ``.git`` (any case)."""
        snap = {k: v for k, v in snapshot(self.base).items() if not _in_workspace(k)}
        for name in os.listdir(self.root):
            if name.casefold() == ".git":
                snap.update({f"ws/{name}/{k}": v for k, v in snapshot(self.root / name).items()})
        return snap


def _in_workspace(key: str) -> bool:
    return key == "ws" or key.startswith("ws/")


def snapshot(top: Path) -> dict[str, tuple[Any, ...]]:
    """path -> (kind, content or link target, mtime_ns) for every entry under ``top``."""
    result: dict[str, tuple[Any, ...]] = {}
    for directory, dirnames, filenames in os.walk(top, followlinks=False):
        for name in (*dirnames, *filenames):
            path = Path(directory) / name
            st = os.lstat(path)
            key = path.relative_to(top).as_posix()
            if stat.S_ISLNK(st.st_mode):
                result[key] = ("link", os.readlink(path), st.st_mtime_ns)
            elif stat.S_ISREG(st.st_mode):
                result[key] = ("file", path.read_bytes(), st.st_mtime_ns)
            elif stat.S_ISDIR(st.st_mode):
                result[key] = ("dir", st.st_mtime_ns)
            else:
                result[key] = ("special", st.st_mode, st.st_mtime_ns)
    return result


def _create(layout: Layout, top: Path, entries: Mapping[str, Entry]) -> None:
    for rel, entry in entries.items():
        path = top / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(entry, File):
            path.write_text(entry.content)
        elif isinstance(entry, Dir):
            path.mkdir(exist_ok=True)
        elif isinstance(entry, Link):
            os.symlink(layout.expand(entry.target), path)
        else:
            os.mkfifo(path)


def _git(root: Path, *args: str) -> None:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root.parent),
           "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    subprocess.run(["git", "-C", str(root), *args], env=env, check=True, capture_output=True)


def build_layout(base: Path, extra: Mapping[str, Entry] | None = None,
                 outside_extra: Mapping[str, Entry] | None = None,
                 git_repo: bool = False) -> Layout:
    """The base layout plus ``extra`` (workspace-relative) and ``outside_extra`` entries.

    ``git_repo``: a real repository (one commit, a secret in ``.git/config``) instead of the
    fake ``.git`` directory.
    """
    layout = Layout(base=base, root=base / "ws", outside=base / "outside")
    layout.root.mkdir(parents=True)
    layout.outside.mkdir()
    _create(layout, layout.outside, {**BASE_OUTSIDE, **(outside_extra or {})})
    entries = {**BASE_WORKSPACE, **(extra or {})}
    if git_repo:
        entries = {k: v for k, v in entries.items() if not k.startswith(".git/")}
    _create(layout, layout.root, entries)
    if git_repo:
        _git(layout.root, "init", "-q", "-b", "main")
        _git(layout.root, "config", "studio.secret", GIT_SECRET)
        _git(layout.root, "add", "-A")
        _git(layout.root, "commit", "-q", "-m", "base")
    return layout


def available_specs() -> list[ToolSpec]:
    """The workspace domain, plus the git and command domains when their modules exist."""
    specs = list(workspace.SPECS)
    for name in ("git", "command"):
        module = _optional_domain(name)
        if module is not None:
            specs.extend(module)
    return specs


def _optional_domain(name: str) -> tuple[ToolSpec, ...] | None:
    try:
        module = importlib.import_module(f"services.execution.tool_domains.{name}.tools")
    except ImportError:
        return None
    specs: tuple[ToolSpec, ...] = module.SPECS
    return specs


def _plain_sandbox() -> Any:
    """The command runner when the sandbox module exists: unsandboxed by default (the command
    rows check that ``cwd`` is refused before anything runs, not the sandbox itself), or the
    mode named by ``STUDIO_CONFINEMENT_SANDBOX`` (CI runs the corpus once per mode)."""
    try:
        module = importlib.import_module("services.execution.sandbox.selection")
    except ImportError:
        return None
    mode = os.environ.get("STUDIO_CONFINEMENT_SANDBOX", "none")
    sandbox = module.select_sandbox(mode)
    if sandbox.mode != mode:
        raise RuntimeError(f"sandbox {mode} is unavailable here: {sandbox.reason}")
    return sandbox


@dataclass
class Harness:
    """A dispatcher and a context on one layout."""

    layout: Layout
    allow_workflows: bool = False
    dispatcher: Dispatcher = field(
        default_factory=lambda: Dispatcher(ToolRegistry(available_specs())))
    calls: int = 0
    _session: list[Any] | None = field(default=None, init=False, repr=False)

    def context(self) -> ToolDomainContext:
        return ToolDomainContext(
            workspace_root=self.layout.root, execution_id="exec-conf", request_id="req-1",
            correlation_id="corr-1", branch="studio/test", default_branch="main",
            allow_workflow_changes=self.allow_workflows, sandbox=self._sandbox(),
        )

    def _sandbox(self) -> Any:
        """The layout's sandbox as an execution has it: under bubblewrap, one long-lived sandbox
        for every call of this harness (issue 12), ended when the harness goes away."""
        if self._session is None:
            sandbox = _plain_sandbox()
            if sandbox is None:
                return None
            stack = contextlib.ExitStack()
            self._session = [stack.enter_context(
                sandbox.session(self.layout.root, lambda code, message: None))]
            weakref.finalize(self, stack.close)
        return self._session[0]

    def call(self, name: str, args: Mapping[str, Any]) -> dict[str, Any]:
        self.calls += 1
        call = self.dispatcher.normalize(f"call-{self.calls}", name, dict(args))
        envelope: Envelope = self.dispatcher.dispatch(call, self.context())
        return envelope_to_json(envelope)


def leaked(envelope: Mapping[str, Any]) -> list[str]:
    """The secrets that appear anywhere in an envelope."""
    text = json.dumps(envelope)
    return [s for s in SECRETS if s in text]
