"""Where a flowchart run's nodes work: a directory the run creates and owns.

A run started through the API never names a host path. It gets
``<workspace root>/flowchart-runs/<run id>`` (:func:`create_run_directory`), made by the run,
``0700``, never the workspace root and never another execution's directory. A node works in that
directory, or in a subdirectory of it named by its ``config.workspace``: a simple relative name
(:func:`check_node_workspace_name`: no ``..``, no absolute path, no dot-names).

Each node's workspace is resolved once, when the node starts (:func:`resolve_node_workspace`):
walked component by component from the run's directory without following a symlink (``O_NOFOLLOW``
on every step), created where missing, and accepted only as a real directory strictly inside the
run's directory. That resolved path is what the node uses; an earlier node that replaced a
directory with a symlink (``rm -rf d && ln -s / d``) gets the node refused with
``workspace_refused``, never a workspace root elsewhere. :func:`check_workspace_root` is the
separate check that a root is neither ``/`` nor the workspace root nor an ancestor of it.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from services.execution.errors import ErrorCode, ExecutionError
from services.repos.workspaces import workspace_root
from services.settings import StudioSettings

RUNS_DIR = "flowchart-runs"
_COMPONENT = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$")
MAX_DEPTH = 8


class WorkspaceRefused(ExecutionError):
    """A node's workspace is not a real directory strictly inside its run's directory."""

    default_code = ErrorCode.WORKSPACE_REFUSED


def check_node_workspace_name(name: str) -> str:
    """``name`` if it is a simple relative name (``a`` or ``a/b``), else :class:`ValueError`."""
    parts = name.split("/")
    if len(parts) > MAX_DEPTH or not all(_COMPONENT.match(part) for part in parts):
        raise ValueError("workspace must be a relative name inside the run's directory "
                         "(letters, digits, '.', '_', '-', separated by '/'; no '..', no "
                         "absolute path, no leading dot)")
    if any(part in (".", "..") for part in parts):
        raise ValueError("workspace must not contain '.' or '..'")
    return name


def runs_directory(settings: StudioSettings) -> Path:
    return workspace_root(settings).resolve() / RUNS_DIR


def create_run_directory(settings: StudioSettings, run_id: str) -> Path:
    """Make the run's own directory (it must not exist yet); answers its resolved path."""
    runs = runs_directory(settings)
    runs.mkdir(mode=0o700, parents=True, exist_ok=True)
    if runs.is_symlink() or not runs.is_dir():
        raise WorkspaceRefused(f"{RUNS_DIR} under the workspace root is not a directory")
    directory = runs / run_id
    directory.mkdir(mode=0o700)
    return directory


def check_workspace_root(root: Path, workspaces: Path) -> None:
    """Refuse a root that is ``/``, the workspace root ``workspaces``, or an ancestor of it."""
    resolved, base = Path(os.path.realpath(root)), Path(os.path.realpath(workspaces))
    if resolved == Path(resolved.anchor) or resolved == base or base.is_relative_to(resolved):
        raise WorkspaceRefused(f"{root} may not be a workspace: it is the filesystem root, the "
                               "workspace root or one of its ancestors")


def _open_step(parent_fd: int, name: str) -> int:
    """Open directory ``name`` under ``parent_fd`` without following a symlink; made if absent."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except FileNotFoundError:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise WorkspaceRefused(f"{name!r} is a symlink or not a directory") from None
        raise


def _walk(run_dir: Path, parts: list[str]) -> None:
    fd = os.open(run_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        for part in parts:
            child = _open_step(fd, part)
            os.close(fd)
            fd = child
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            raise WorkspaceRefused("the workspace is not a directory")
    finally:
        os.close(fd)


def resolve_node_workspace(run_dir: Path, name: str | None, *,
                           workspaces: Path | None = None) -> Path:
    """The node's workspace, resolved once: ``run_dir`` itself or ``run_dir/name``.

    Refused (:class:`WorkspaceRefused`) unless every step is a real directory (no symlink) and
    the result is ``run_dir`` or strictly inside it; with ``workspaces`` (the workspace root of
    an API-started run) ``run_dir`` must also lie strictly inside that root.
    """
    try:
        parts = check_node_workspace_name(name).split("/") if name else []
    except ValueError as exc:
        raise WorkspaceRefused(str(exc)) from None
    if run_dir.is_symlink() or not run_dir.is_dir() or Path(os.path.realpath(run_dir)) != run_dir:
        raise WorkspaceRefused("the run's directory is missing, moved or a symlink")
    if run_dir == Path(run_dir.anchor):
        raise WorkspaceRefused("the filesystem root may not be a workspace")
    if workspaces is not None:
        check_workspace_root(run_dir, workspaces)
        if not run_dir.is_relative_to(Path(os.path.realpath(workspaces))):
            raise WorkspaceRefused("the run's directory is outside the workspace root")
    try:
        _walk(run_dir, parts)
    except OSError as exc:
        raise WorkspaceRefused(f"the workspace could not be opened: {exc.strerror}") from None
    target = run_dir.joinpath(*parts)
    if Path(os.path.realpath(target)) != target or not target.is_relative_to(run_dir):
        raise WorkspaceRefused("the workspace changed while it was resolved")
    return target
