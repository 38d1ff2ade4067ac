"""Workspace traversals: list_dir, glob, search.

All three walk with :func:`confinement.walk`: symlinks are never entered, entries leading outside
the workspace or into ``.git`` are skipped and counted (``skipped_outside``,
``skipped_protected``, ``skipped_special``), never listed or read.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any

from pydantic import Field

from services.execution.confinement import ResolvedPath, TreeEntry, WalkReport, walk
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolArgs
from services.execution.tool_domains.workspace.io import (
    failure,
    is_binary,
    kind_of,
    read_regular,
    resolve,
)
from services.execution.tool_domains.workspace.regex import BoundedPattern

MAX_LIST_ENTRIES = 5000
MAX_GLOB_RESULTS = 1000
MAX_SEARCH_FILE_BYTES = 2 * 1024 * 1024
MAX_MATCH_CHARS = 500


class ListDirArgs(ToolArgs):
    path: str = Field(default=".", description="Directory to list.")
    recursive: bool = Field(default=False, description="List the whole subtree.")
    include_hidden: bool = Field(default=False, description="Include dot-files and dot-dirs.")


class GlobArgs(ToolArgs):
    pattern: str = Field(min_length=1, description="Relative glob: *, ?, [abc], {a,b}, **.")
    path: str = Field(default=".", description="Directory the pattern is relative to.")


class SearchArgs(ToolArgs):
    pattern: str = Field(min_length=1, description="Regular expression (or literal text).")
    path: str = Field(default=".", description="File or directory to search.")
    glob: str | None = Field(default=None, description="Only files matching this glob.")
    regex: bool = Field(default=True, description="False: the pattern is literal text.")
    max_results: int = Field(default=200, ge=1, le=2000, description="Stop after this many.")


def _directory(ctx: ToolDomainContext, raw: str) -> ResolvedPath:
    start = resolve(ctx, raw)
    if not start.exists():
        raise failure(ErrorCode.PATH_NOT_FOUND, "no such directory", start)
    if kind_of(start.absolute) != "dir":
        raise failure(ErrorCode.NOT_A_DIRECTORY, "not a directory", start)
    return start


def list_dir(args: ListDirArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    start = _directory(ctx, args.path)
    report = WalkReport()
    entries: list[dict[str, Any]] = []
    truncated = False
    for entry in walk(start, recursive=args.recursive, include_hidden=args.include_hidden,
                      report=report):
        if len(entries) >= MAX_LIST_ENTRIES:
            truncated = True
            break
        entries.append({"path": entry.path.display, "kind": entry.kind, "size": entry.size})
    return {"path": start.display, "entries": entries, "count": len(entries),
            "truncated": truncated, **report.as_dict()}


def _class_regex(body: str) -> str:
    negate = body.startswith("!")
    body = body[1:] if negate else body
    escaped = "".join(c if c == "-" else re.escape(c) for c in body)
    return "[" + ("^" if negate else "") + escaped + "]"


def _segment_regex(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        char = segment[i]
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif char == "[" and segment.find("]", i + 2) != -1:
            end = segment.find("]", i + 2)
            out.append(_class_regex(segment[i + 1:end]))
            i = end
        elif char == "{" and "}" in segment[i:]:
            end = segment.index("}", i)
            options = segment[i + 1:end].split(",")
            out.append("(?:" + "|".join(_segment_regex(o) for o in options) + ")")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return "".join(out)


def glob_regex(pattern: str) -> BoundedPattern:
    """A compiled regex for a relative glob; ``**`` spans any number of directories."""
    if pattern.startswith("/") or "\x00" in pattern:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENTS, "glob pattern must be relative",
                          details={"pattern": pattern})
    parts = [p for p in pattern.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENTS, "glob pattern may not contain '..'",
                          details={"pattern": pattern})
    if not parts:
        raise ToolFailure(ErrorCode.INVALID_ARGUMENTS, "empty glob pattern",
                          details={"pattern": pattern})
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:[^/]+/)*"
        else:
            regex += _segment_regex(part) + ("" if last else "/")
    return BoundedPattern(pattern, translated=regex)


def _relative_to(entry: TreeEntry, start: ResolvedPath) -> str:
    return entry.path.relative.relative_to(start.relative).as_posix()


def glob(args: GlobArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    matcher = glob_regex(args.pattern)
    start = _directory(ctx, args.path)
    recursive = "**" in args.pattern or "/" in args.pattern.strip("/")
    report = WalkReport()
    matches: list[dict[str, Any]] = []
    truncated = False
    for entry in walk(start, recursive=recursive, include_hidden=True, report=report):
        if not matcher.fullmatch(_relative_to(entry, start)):
            continue
        if len(matches) >= MAX_GLOB_RESULTS:
            truncated = True
            break
        matches.append({"path": entry.path.display, "kind": entry.kind})
    matches.sort(key=lambda m: str(m["path"]))
    return {"pattern": args.pattern, "path": start.display, "matches": matches,
            "count": len(matches), "truncated": truncated, **report.as_dict()}


def _files(start: ResolvedPath, file_filter: BoundedPattern | None, by_name: bool,
           report: WalkReport) -> Iterator[ResolvedPath]:
    if kind_of(start.absolute) == "file":
        yield start
        return
    for entry in walk(start, recursive=True, include_hidden=True, report=report):
        if entry.kind != "file":
            continue  # symlinks are not followed, like ripgrep
        rel = PurePosixPath(_relative_to(entry, start))
        if file_filter and not file_filter.fullmatch(rel.name if by_name else rel.as_posix()):
            continue
        yield entry.path


def search(args: SearchArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    matcher = BoundedPattern(args.pattern, literal=not args.regex)
    file_filter = glob_regex(args.glob) if args.glob else None
    start = resolve(ctx, args.path)
    if not start.exists():
        raise failure(ErrorCode.PATH_NOT_FOUND, "no such file or directory", start)
    report = WalkReport()
    counts = {"files_searched": 0, "skipped_binary": 0, "skipped_large": 0}
    matches: list[dict[str, Any]] = []
    truncated = False
    by_name = args.glob is not None and "/" not in args.glob
    for target in _files(start, file_filter, by_name, report):
        try:
            data = read_regular(target, MAX_SEARCH_FILE_BYTES)
        except ToolFailure as skipped:
            if skipped.code is ErrorCode.FILE_TOO_LARGE:
                counts["skipped_large"] += 1
            else:
                report.skipped_special += 1
            continue
        if is_binary(data):
            counts["skipped_binary"] += 1
            continue
        counts["files_searched"] += 1
        for number, line in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
            if not matcher.search(line):
                continue
            if len(matches) >= args.max_results:
                truncated = True
                break
            matches.append({"path": target.display, "line": number,
                            "text": line.rstrip("\r")[:MAX_MATCH_CHARS]})
        if truncated:
            break
    return {"pattern": args.pattern, "path": start.display, "matches": matches,
            "count": len(matches), "truncated": truncated, **counts, **report.as_dict()}
