"""Node workspaces of a flowchart run: relative names only, resolved once, never through a
symlink, never the workspace root or an ancestor of it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from services.flowcharts.workspace import (
    WorkspaceRefused,
    check_node_workspace_name,
    check_workspace_root,
    create_run_directory,
    resolve_node_workspace,
)
from services.settings import StudioSettings


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "workspaces"
    path.mkdir()
    return path.resolve()


@pytest.fixture
def run_dir(root: Path) -> Path:
    return create_run_directory(StudioSettings(workspace_dir=root), "run-1")


@pytest.mark.parametrize("name", ["a", "a/b", "build-1", "x.y_z", "a/b/c/d/e/f/g/h"])
def test_simple_relative_names_are_accepted(name: str) -> None:
    assert check_node_workspace_name(name) == name


@pytest.mark.parametrize("name", ["", "/etc", "..", "../x", "a/../../b", "a/./b", ".git", "a//b",
                                  "a/", "a\\b", "a b", "a/b/c/d/e/f/g/h/i", "x" * 101])
def test_anything_else_is_refused(name: str) -> None:
    with pytest.raises(ValueError):
        check_node_workspace_name(name)


def test_the_run_directory_is_its_own_and_private(root: Path, run_dir: Path) -> None:
    assert run_dir == root / "flowchart-runs" / "run-1"
    assert oct(run_dir.stat().st_mode & 0o777) == "0o700"
    with pytest.raises(FileExistsError):  # never another run's directory
        create_run_directory(StudioSettings(workspace_dir=root), "run-1")


def test_a_node_workspace_is_made_and_resolved_inside_the_run(root: Path, run_dir: Path) -> None:
    assert resolve_node_workspace(run_dir, None, workspaces=root) == run_dir
    made = resolve_node_workspace(run_dir, "agents/fixer", workspaces=root)
    assert made == run_dir / "agents" / "fixer" and made.is_dir() and not made.is_symlink()


@pytest.mark.parametrize("target", ["/", "..", "../..", "elsewhere"])
def test_a_symlink_anywhere_on_the_way_is_refused(root: Path, run_dir: Path, tmp_path: Path,
                                                  target: str) -> None:
    (tmp_path / "elsewhere").mkdir()
    (run_dir / "d").symlink_to(tmp_path / target if target == "elsewhere" else target)
    for name in ("d", "d/sub"):
        with pytest.raises(WorkspaceRefused) as refused:
            resolve_node_workspace(run_dir, name, workspaces=root)
        assert refused.value.code.value == "workspace_refused"
    (run_dir / "real").mkdir()
    (run_dir / "real" / "link").symlink_to("/")
    with pytest.raises(WorkspaceRefused):
        resolve_node_workspace(run_dir, "real/link/etc", workspaces=root)


def test_a_file_where_the_directory_should_be_is_refused(root: Path, run_dir: Path) -> None:
    (run_dir / "f").write_text("x")
    with pytest.raises(WorkspaceRefused):
        resolve_node_workspace(run_dir, "f", workspaces=root)


def test_the_run_directory_itself_must_be_real_and_inside_the_root(root: Path, run_dir: Path,
                                                                   tmp_path: Path) -> None:
    link = root / "flowchart-runs" / "run-2"
    link.symlink_to(run_dir)
    with pytest.raises(WorkspaceRefused):
        resolve_node_workspace(link, None, workspaces=root)
    for bad in (Path("/"), root, root.parent):
        with pytest.raises(WorkspaceRefused):
            resolve_node_workspace(bad, None, workspaces=root)
    outside = tmp_path / "outside"
    outside.mkdir()
    with pytest.raises(WorkspaceRefused):
        resolve_node_workspace(outside.resolve(), None, workspaces=root)


def test_check_workspace_root_refuses_slash_the_root_and_its_ancestors(root: Path,
                                                                      run_dir: Path) -> None:
    for bad in (Path("/"), root, root.parent, Path(os.path.relpath(root.parent))):
        with pytest.raises(WorkspaceRefused):
            check_workspace_root(bad, root)
    check_workspace_root(run_dir, root)
