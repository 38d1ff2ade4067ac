"""Workspace operations on single files: read, write, edit, stat, make_dir."""

from __future__ import annotations

import os
import stat as stat_module
from typing import Any

from pydantic import Field

from services.execution.errors import ConfinementViolation, ErrorCode
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolArgs
from services.execution.tool_domains.workspace.io import (
    MAX_FILE_BYTES,
    check_room,
    failure,
    kind_of,
    kind_of_mode,
    lstat_entry,
    make_dirs,
    read_text,
    resolve,
    write_regular,
)

MAX_LINE_CHARS = 2000


class ReadFileArgs(ToolArgs):
    path: str = Field(description="File to read, relative to the workspace root.")
    offset: int = Field(default=1, ge=1, description="First line to return (1-based).")
    limit: int = Field(default=2000, ge=1, le=20000, description="How many lines to return.")


class WriteFileArgs(ToolArgs):
    path: str = Field(description="File to create or overwrite; missing parents are created.")
    content: str = Field(description="The complete new content (UTF-8).")


class EditFileArgs(ToolArgs):
    path: str = Field(description="File to edit.")
    old_text: str = Field(min_length=1, description="Exact text to replace.")
    new_text: str = Field(description="Replacement text.")
    replace_all: bool = Field(default=False, description="Replace every occurrence.")


class PathArgs(ToolArgs):
    path: str = Field(description="Path relative to the workspace root.")


def _split_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def read_file(args: ReadFileArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path)
    lines = _split_lines(read_text(target))
    start = args.offset - 1
    window = lines[start:start + args.limit]
    numbered = "\n".join(
        f"{start + i + 1:>6}\t{line[:MAX_LINE_CHARS]}" for i, line in enumerate(window)
    )
    return {
        "path": target.display,
        "content": numbered,
        "offset": args.offset,
        "lines_returned": len(window),
        "total_lines": len(lines),
        "truncated": start + len(window) < len(lines),
    }


def write_file(args: WriteFileArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path, write=True)
    data = args.content.encode("utf-8", "surrogateescape")
    if len(data) > MAX_FILE_BYTES:
        raise failure(ErrorCode.FILE_TOO_LARGE, f"content is larger than {MAX_FILE_BYTES} bytes",
                      target, size=len(data))
    check_room(ctx, len(data), target)
    created = write_regular(target, data)
    return {"path": target.display, "bytes_written": len(data), "created": created,
            "overwritten": not created}


def edit_file(args: EditFileArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path, write=True)
    text = read_text(target, errors="surrogateescape")
    count = text.count(args.old_text)
    if count == 0:
        raise failure(ErrorCode.EDIT_NO_MATCH, "old_text does not occur in the file", target)
    if count > 1 and not args.replace_all:
        raise failure(ErrorCode.EDIT_AMBIGUOUS,
                      f"old_text occurs {count} times; add context or set replace_all",
                      target, occurrences=count)
    updated = text.replace(args.old_text, args.new_text, -1 if args.replace_all else 1)
    write_regular(target, updated.encode("utf-8", "surrogateescape"))
    return {"path": target.display, "replacements": count if args.replace_all else 1}


def _link_target(ctx: ToolDomainContext, display: str) -> tuple[str | None, bool]:
    """Where a symlink leads, shown only when that is inside the workspace."""
    try:
        target = resolve(ctx, display)
    except ConfinementViolation:
        return None, False
    return target.display, True


def stat_path(args: PathArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path, follow_final=False)
    st = lstat_entry(target)
    kind = kind_of_mode(st.st_mode)
    result: dict[str, Any] = {
        "path": target.display,
        "kind": kind,
        "size": st.st_size if kind == "file" else 0,
        "mode": oct(stat_module.S_IMODE(st.st_mode)),
        "mtime": st.st_mtime,
        "is_symlink": kind == "symlink",
        "link_target": None,
        "link_target_inside": None,
    }
    if kind == "symlink":
        result["link_target"], result["link_target_inside"] = _link_target(ctx, target.display)
    return result


def make_dir(args: PathArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    target = resolve(ctx, args.path, write=True)
    if os.path.lexists(target.absolute):
        if kind_of(target.absolute) != "dir":
            raise failure(ErrorCode.PATH_EXISTS, "exists and is not a directory", target)
        return {"path": target.display, "created": False}
    make_dirs(target)
    return {"path": target.display, "created": True}
