"""The open workspace root: a directory swapped for a symlink after resolution leads nowhere.

A process left over from a command (Landlock mode before issue 19 let a ``setsid`` child live on)
can exchange a workspace directory with a symlink to the outside between the harness's check and
its use. These tests take the race out of it: resolve, swap, then use. Before the root handle,
the use followed the new link (``read_file`` returned the outside file, ``write_file`` created one
outside); now it fails.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest

from services.execution import confinement_root
from services.execution.confinement_root import RootHandle, validate_root
from services.execution.errors import ConfinementViolation, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.workspace.io import read_regular, resolve, write_regular

SECRET = "TOP-SECRET-OUTSIDE\n"


@pytest.fixture(params=["openat2", "walk"])
def open_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both ways of resolving beneath: the kernel's ``openat2`` and the ``O_NOFOLLOW`` walk."""
    if request.param == "walk":
        monkeypatch.setattr(confinement_root, "openat2_available", lambda: False)
    else:
        assert confinement_root.openat2_available(), "this kernel has openat2 (5.6+)"
    return str(request.param)


def _ctx(workspace: Path) -> ToolDomainContext:
    return ToolDomainContext(workspace_root=workspace, execution_id="e", request_id="r",
                             correlation_id="c")


def _swap_for_link(directory: Path, target: Path) -> None:
    """What the leftover process does: the directory becomes a symlink to ``target``."""
    directory.rename(directory.with_name(directory.name + ".old"))
    directory.symlink_to(target)


def _outside(workspace: Path) -> Path:
    return workspace.parent / "outside"


def test_a_read_after_the_swap_does_not_leave(workspace: Path, open_mode: str) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "secret.txt").write_text("inside\n")
    ctx = _ctx(workspace)
    target = resolve(ctx, "sub/secret.txt")
    _swap_for_link(workspace / "sub", _outside(workspace))
    with pytest.raises(ToolFailure) as caught:
        read_regular(target)
    assert SECRET not in str(caught.value.details)


def test_a_write_after_the_swap_does_not_leave(workspace: Path, open_mode: str) -> None:
    (workspace / "sub").mkdir()
    ctx = _ctx(workspace)
    target = resolve(ctx, "sub/planted.txt", write=True)
    _swap_for_link(workspace / "sub", _outside(workspace))
    with pytest.raises(ToolFailure):
        write_regular(target, b"written\n")
    assert not (_outside(workspace) / "planted.txt").exists()


def test_missing_parents_are_not_made_through_a_swapped_link(
    workspace: Path, open_mode: str
) -> None:
    (workspace / "sub").mkdir()
    ctx = _ctx(workspace)
    target = resolve(ctx, "sub/new/dir/file.txt", write=True)
    _swap_for_link(workspace / "sub", _outside(workspace))
    with pytest.raises(ToolFailure):
        write_regular(target, b"x")
    assert not (_outside(workspace) / "new").exists()


def test_a_replaced_root_is_refused(workspace: Path) -> None:
    ctx = _ctx(workspace)
    ctx.root_handle()
    workspace.rename(workspace.with_name("moved"))
    workspace.symlink_to(_outside(workspace))
    with pytest.raises(ConfinementViolation):
        resolve(ctx, "secret.txt")


def test_ordinary_paths_open_beneath_the_root(workspace: Path, open_mode: str) -> None:
    (workspace / "a" / "b").mkdir(parents=True)
    (workspace / "a" / "b" / "f.txt").write_text("hello\n")
    handle = RootHandle(workspace)
    fd = handle.open(PurePosixPath("a/b/f.txt"), os.O_RDONLY)
    try:
        assert os.read(fd, 100) == b"hello\n"
    finally:
        os.close(fd)
    (workspace / "a" / "link").symlink_to("b")
    with pytest.raises(OSError):
        handle.open("a/link/f.txt", os.O_RDONLY)
    with pytest.raises(ConfinementViolation):
        handle.open("../outside/secret.txt", os.O_RDONLY)
    handle.close()


@pytest.mark.parametrize(
    "root", [lambda ws: Path("/"), lambda ws: ws.parent, lambda ws: ws.parent.parent,
             lambda ws: Path("/etc"), lambda ws: ws.parent / "outside"],
)
def test_roots_that_are_not_beneath_the_workspaces_are_refused(
    workspace: Path, root: Callable[[Path], Path]
) -> None:
    (workspace.parent / "outside").mkdir(exist_ok=True)
    base = workspace.parent / "workspaces"
    base.mkdir()
    with pytest.raises(ConfinementViolation):
        validate_root(root(workspace), base=base)


def test_a_root_beneath_the_workspaces_is_accepted(workspace: Path) -> None:
    base = workspace.parent
    assert validate_root(workspace, base=base) == Path(os.path.realpath(workspace))
    with pytest.raises(ConfinementViolation):
        validate_root("/")
    with pytest.raises(ConfinementViolation):
        _ctx(Path("/")).root_handle()


def test_a_context_for_another_root_gets_its_own_handle(workspace: Path, tmp_path: Path) -> None:
    other = tmp_path / "other-ws"
    other.mkdir()
    ctx = _ctx(workspace)
    assert ctx.resolved_workspace_root() == Path(os.path.realpath(workspace))
    moved = dataclasses.replace(ctx, workspace_root=other)
    assert moved.resolved_workspace_root() == Path(os.path.realpath(other))
    assert ctx.root_handle() is not moved.root_handle()
