"""``workspace.apply_patch``: a unified diff applied in process, all or nothing.

Parsed here rather than handed to ``git apply`` so that every path goes through
:func:`confinement.resolve_path` (``Access.WRITE``) before anything is read or written. Supported:
plain ``---``/``+++`` diffs and ``git diff`` output (``a/``/``b/`` prefixes, ``/dev/null`` for
created and deleted files, ``rename from``/``rename to``, ``\\ No newline at end of file``).
Each hunk must match its context exactly, at its stated line or shifted; the whole patch is
applied in memory first, so a hunk that fails leaves every file untouched (``patch_failed``).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from services.execution.confinement import ResolvedPath
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolArgs
from services.execution.tool_domains.workspace.io import (
    kind_of,
    lstat_entry,
    make_parents,
    read_text,
    resolve,
)

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DEV_NULL = "/dev/null"


class ApplyPatchArgs(ToolArgs):
    patch: str = Field(min_length=1, description="A unified diff (git diff format accepted).")


@dataclass
class Hunk:
    old_start: int
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    old_no_eol: bool = False
    new_no_eol: bool = False


@dataclass
class FilePatch:
    old_path: str | None = None
    new_path: str | None = None
    hunks: list[Hunk] = field(default_factory=list)
    git: bool = False


def _bad(message: str, **details: object) -> ToolFailure:
    return ToolFailure(ErrorCode.PATCH_FAILED, message, details=dict(details))


def _header_path(line: str, git: bool) -> str | None:
    path = line[4:].split("\t", 1)[0].rstrip("\r")
    if path.startswith('"'):
        raise _bad("quoted paths are not supported", header=line)
    if path == _DEV_NULL:
        return None
    if git and path[:2] in ("a/", "b/"):
        return path[2:]
    return path


def _git_style(old_header: str, new_header: str) -> bool:
    """``--- a/x`` / ``+++ b/x`` without a ``diff --git`` line: strip the prefixes too."""
    old = old_header[4:].split("\t", 1)[0]
    new = new_header[4:].split("\t", 1)[0]
    return (old == _DEV_NULL or old.startswith("a/")) and (
        new == _DEV_NULL or new.startswith("b/")) and not (old == new == _DEV_NULL)


def _read_hunk(lines: list[str], index: int, match: re.Match[str]) -> tuple[Hunk, int]:
    old_left = int(match.group(2) or "1")
    new_left = int(match.group(4) or "1")
    hunk = Hunk(old_start=int(match.group(1)))
    last = ""
    while index < len(lines):
        line = lines[index]
        tag = line[:1] or " "  # an empty context line whose space an editor stripped
        if tag == "\\":
            hunk.old_no_eol |= last in (" ", "-")
            hunk.new_no_eol |= last in (" ", "+")
            index += 1
            continue
        if (old_left <= 0 and new_left <= 0) or tag not in (" ", "-", "+"):
            break
        if tag in (" ", "-"):
            hunk.old.append(line[1:])
            old_left -= 1
        if tag in (" ", "+"):
            hunk.new.append(line[1:])
            new_left -= 1
        last = tag
        index += 1
    if old_left != 0 or new_left != 0:
        raise _bad("hunk does not have the line counts its header says", hunk=match.group(0))
    return hunk, index


def parse_patch(text: str) -> list[FilePatch]:
    """The file patches of a unified diff, in order."""
    lines = text.split("\n")
    patches: list[FilePatch] = []
    current: FilePatch | None = None
    index = 0
    while index < len(lines):
        line = lines[index].rstrip("\r") if not lines[index].startswith(("+", "-", " ")) \
            else lines[index]
        if line.startswith("diff --git "):
            current = FilePatch(git=True)
            patches.append(current)
        elif line.startswith(("rename from ", "rename to ")) and current is not None:
            name = line.split(" ", 2)[2]
            if line.startswith("rename from "):
                current.old_path = name
            else:
                current.new_path = name
        elif line.startswith("--- ") and lines[index + 1:index + 2] \
                and lines[index + 1].startswith("+++ "):
            if current is None or current.hunks or not current.git:
                current = FilePatch(git=False)
                patches.append(current)
            prefixed = current.git or _git_style(line, lines[index + 1])
            current.old_path = _header_path(line, prefixed)
            current.new_path = _header_path(lines[index + 1], prefixed)
            index += 1
        elif (match := _HUNK.match(line)) is not None:
            if current is None:
                raise _bad("hunk before any file header", hunk=line)
            hunk, index = _read_hunk(lines, index + 1, match)
            current.hunks.append(hunk)
            continue
        elif line.startswith(("GIT binary patch", "Binary files ")):
            raise _bad("binary patches are not supported")
        index += 1
    if not patches:
        raise _bad("no file headers found in the patch")
    return patches


def _apply_hunks(lines: list[str], eol: bool, hunks: list[Hunk],
                 path: str) -> tuple[list[str], bool]:
    floor = 0
    for number, hunk in enumerate(hunks, start=1):
        wanted = max(hunk.old_start - 1 if hunk.old else hunk.old_start, 0)
        at = _find(lines, hunk.old, wanted, floor)
        if at is None:
            raise _bad("hunk does not match the file", path=path, hunk=number,
                       expected=hunk.old[:20])
        end = at + len(hunk.old)
        if end == len(lines):
            eol = not hunk.new_no_eol
        lines = lines[:at] + hunk.new + lines[end:]
        floor = at + len(hunk.new)
    return lines, eol


def _find(lines: list[str], block: list[str], wanted: int, floor: int) -> int | None:
    size = len(block)
    for shift in range(len(lines) + 1):
        for at in (wanted - shift, wanted + shift):
            if floor <= at <= len(lines) - size and lines[at:at + size] == block:
                return at
        if wanted - shift < floor and wanted + shift > len(lines) - size:
            return None
    return None


def _split(text: str) -> tuple[list[str], bool]:
    if text == "":
        return [], True
    eol = text.endswith("\n")
    return (text[:-1] if eol else text).split("\n"), eol


def _join(lines: list[str], eol: bool) -> str:
    return "\n".join(lines) + ("\n" if eol and lines else "")


Planned = dict[ResolvedPath, str | None]  # None: delete


def _current(plan: Planned, target: ResolvedPath) -> str | None:
    if target in plan:
        return plan[target]
    if not target.exists():
        return None
    if kind_of(target.absolute) != "file":
        raise _bad("not a regular file", path=target.display)
    return read_text(target, errors="surrogateescape")


def _plan_file(ctx: ToolDomainContext, patch: FilePatch, plan: Planned) -> None:
    old = resolve(ctx, patch.old_path, write=True) if patch.old_path else None
    new = resolve(ctx, patch.new_path, write=True) if patch.new_path else None
    source = old or new
    assert source is not None
    before = _current(plan, old) if old else None
    if old and before is None:
        raise _bad("file to patch does not exist", path=old.display)
    if old is None and new is not None and _current(plan, new) is not None:
        raise _bad("file to create already exists", path=new.display)
    lines, eol = _split(before or "")
    lines, eol = _apply_hunks(lines, eol, patch.hunks, source.display)
    if old is not None and old != new:
        plan[old] = None
    if new is not None:
        plan[new] = _join(lines, eol)


def _stage(target: ResolvedPath, content: str) -> str:
    """Write ``content`` to a new temporary file beside ``target`` (opened beneath the root)."""
    make_parents(target)
    mode = lstat_entry(target).st_mode & 0o777 if target.exists() else 0o644
    temp = f".studio-patch-{secrets.token_hex(8)}"
    with target.parent() as (dir_fd, _name):
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o600, dir_fd=dir_fd)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content.encode("utf-8", "surrogateescape"))
        os.fchmod(handle.fileno(), mode)
    return temp


def _commit(plan: Planned) -> None:
    staged: list[tuple[str, ResolvedPath]] = []
    try:
        for target, content in plan.items():
            if content is not None:
                staged.append((_stage(target, content), target))
    except (OSError, ToolFailure):
        for temp, target in staged:
            with target.parent() as (dir_fd, _name), contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dir_fd)
        raise _bad("could not stage the patched files") from None
    for temp, target in staged:
        with target.parent() as (dir_fd, name):
            os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    for target, content in plan.items():
        if content is None and target.exists():
            with target.parent() as (dir_fd, name):
                os.unlink(name, dir_fd=dir_fd)


def apply_patch(args: ApplyPatchArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    plan: Planned = {}
    files: list[dict[str, Any]] = []
    for patch in parse_patch(args.patch):
        _plan_file(ctx, patch, plan)
        files.append({"old_path": patch.old_path, "new_path": patch.new_path,
                      "hunks": len(patch.hunks)})
    _commit(plan)
    changed = sorted(t.display for t, c in plan.items() if c is not None)
    deleted = sorted(t.display for t, c in plan.items() if c is None)
    return {"files": files, "changed": changed, "deleted": deleted,
            "hunks_applied": sum(f["hunks"] for f in files)}
