"""Workspace operations that remove or relocate entries: delete_path, move_path, copy_path.

A directory is removed, moved or overwritten only when nothing in its subtree is protected
(``.git`` anywhere, ``.github/workflows`` unless the execution allows it): checking only the top
would let ``move_path("tmp", ".github")`` plant workflows or ``delete_path("sub")`` erase a
nested repository. The workspace root itself is never deleted or moved. Symlinks are removed or
moved as links, never followed; a directory copy walks with :func:`confinement.walk`, so entries
leading outside are skipped and counted, never copied.
"""

from __future__ import annotations

import os
import shutil
from pathlib import PurePosixPath
from typing import Any

from pydantic import Field

from services.execution.confinement import ResolvedPath, WalkReport, walk
from services.execution.errors import ErrorCode
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolArgs
from services.execution.tool_domains.workspace.io import (
    check_room,
    copy_regular,
    failure,
    guard_subtree,
    kind_of,
    lstat_entry,
    make_parents,
    os_errors,
    resolve,
    subtree,
)


class DeleteArgs(ToolArgs):
    path: str = Field(description="File, symlink or directory to delete.")
    recursive: bool = Field(default=False, description="Delete a non-empty directory.")


class TransferArgs(ToolArgs):
    source: str = Field(description="Existing path.")
    destination: str = Field(description="New path (missing parents are created).")
    overwrite: bool = Field(default=False, description="Replace an existing destination.")


def _not_root(target: ResolvedPath, what: str) -> None:
    if target.display == ".":
        raise failure(ErrorCode.PROTECTED_PATH, f"the workspace root cannot be {what}", target)


def _existing(target: ResolvedPath) -> str:
    if not target.exists():
        raise failure(ErrorCode.PATH_NOT_FOUND, "no such file or directory", target)
    return kind_of(target.absolute)


def _entries(ctx: ToolDomainContext, target: ResolvedPath, kind: str) -> list[PurePosixPath]:
    """The subtree of a directory about to be removed, after checking none of it is protected."""
    entries = subtree(target.absolute) if kind == "dir" else []
    guard_subtree(ctx, target.display, target.relative, entries)
    return entries


def _remove(target: ResolvedPath, kind: str) -> None:
    with os_errors(target), target.parent() as (dir_fd, name):
        if kind == "dir":
            shutil.rmtree(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)


def delete_path(args: DeleteArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path, write=True, follow_final=False)
    _not_root(target, "deleted")
    kind = _existing(target)
    entries = _entries(ctx, target, kind)
    if kind == "dir" and entries and not args.recursive:
        raise failure(ErrorCode.INVALID_ARGUMENTS,
                      "directory is not empty; pass recursive=true to delete it", target)
    _remove(target, kind)
    return {"path": target.display, "kind": kind, "entries_removed": len(entries) + 1}


def _inside(child: ResolvedPath, parent: ResolvedPath) -> bool:
    return child.absolute == parent.absolute or parent.absolute in child.absolute.parents


def _prepare_destination(ctx: ToolDomainContext, source: ResolvedPath,
                         destination: ResolvedPath, overwrite: bool) -> bool:
    """Clear the way for ``destination``; returns whether something was replaced."""
    if _inside(destination, source):
        raise failure(ErrorCode.INVALID_ARGUMENTS, "destination is inside the source",
                      destination, source=source.display)
    if _inside(source, destination):
        raise failure(ErrorCode.INVALID_ARGUMENTS, "source is inside the destination",
                      destination, source=source.display)
    _not_root(destination, "replaced")
    if not destination.exists():
        make_parents(destination)
        return False
    if not overwrite:
        raise failure(ErrorCode.PATH_EXISTS, "destination exists; pass overwrite=true",
                      destination)
    kind = kind_of(destination.absolute)
    _entries(ctx, destination, kind)
    _remove(destination, kind)
    return True


def move_path(args: TransferArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    source = resolve(ctx, args.source, write=True, follow_final=False)
    destination = resolve(ctx, args.destination, write=True, follow_final=False)
    _not_root(source, "moved")
    kind = _existing(source)
    entries = _entries(ctx, source, kind)
    guard_subtree(ctx, destination.display, destination.relative, entries)
    replaced = _prepare_destination(ctx, source, destination, args.overwrite)
    with os_errors(destination), source.parent() as (src_fd, src_name), \
            destination.parent() as (dst_fd, dst_name):
        os.rename(src_name, dst_name, src_dir_fd=src_fd, dst_dir_fd=dst_fd)
    return {"source": source.display, "destination": destination.display, "kind": kind,
            "overwritten": replaced}


def _mkdir(target: ResolvedPath) -> None:
    with os_errors(target), target.parent() as (dir_fd, name):
        os.mkdir(name, dir_fd=dir_fd)


def _copy_tree(ctx: ToolDomainContext, source: ResolvedPath,
               destination: ResolvedPath) -> dict[str, int]:
    report = WalkReport()
    plan = list(walk(source, recursive=True, include_hidden=True, report=report))
    moved = [PurePosixPath(e.path.relative.relative_to(source.relative)) for e in plan]
    guard_subtree(ctx, destination.display, destination.relative, moved)
    planned = sum(e.size for e in plan if e.kind == "file")
    check_room(ctx, planned, destination, ctx.max_copy_bytes)
    counts = {"files_copied": 0, "dirs_created": 1, "symlinks_copied": 0, "bytes_copied": 0}
    _mkdir(destination)
    for entry, rel in zip(plan, moved, strict=True):
        target = resolve(ctx, (destination.relative / rel).as_posix(), write=True,
                         follow_final=False)
        if entry.kind == "dir":
            _mkdir(target)
            counts["dirs_created"] += 1
        elif entry.kind == "file":
            counts["bytes_copied"] += copy_regular(entry.path, target)
            counts["files_copied"] += 1
        else:
            # The link led inside when walk vetted it; re-aim it from its new place.
            linked = resolve(ctx, entry.path.display)
            with os_errors(target), target.parent() as (dir_fd, name):
                os.symlink(os.path.relpath(linked.absolute, target.absolute.parent), name,
                           dir_fd=dir_fd)
            counts["symlinks_copied"] += 1
    return {**counts, **report.as_dict()}


def copy_path(args: TransferArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    source = resolve(ctx, args.source)
    destination = resolve(ctx, args.destination, write=True, follow_final=False)
    kind = _existing(source)
    if kind != "dir":
        # Apparent size: a sparse file's holes become real blocks in the copy.
        check_room(ctx, lstat_entry(source).st_size, destination, ctx.max_copy_bytes)
    replaced = _prepare_destination(ctx, source, destination, args.overwrite)
    if kind == "dir":
        counts = _copy_tree(ctx, source, destination)
    else:
        counts = {"files_copied": 1, "bytes_copied": copy_regular(source, destination)}
    return {"source": source.display, "destination": destination.display, "kind": kind,
            "overwritten": replaced, **counts}
