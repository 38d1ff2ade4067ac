"""Path confinement: the one function every path argument goes through.

:func:`resolve_path` turns a path given by a model, a user or a configuration into an absolute
path that is guaranteed to lie inside the workspace root, resolving every symlink component by
component (final component, parents, chains, dangling links) without ever touching anything
outside the root. :func:`walk` lists a directory tree under the same rules, skipping (and counting)
entries that would lead outside instead of failing.

Refusals, each with a stable code:

* NUL bytes, over-long paths or components -> ``invalid_arguments``
* absolute paths not lexically under the root (``/etc``, ``/proc/self/root``, ``/proc/self/cwd``),
  ``..`` above the root, symlinks whose target leads outside -> ``path_outside_workspace``
* anything inside a ``.git`` directory (any depth, any case) unless explicitly allowed, and writes
  under ``.github/workflows/`` unless allowed -> ``protected_path``
* device files, FIFOs and sockets -> ``unsupported_file_type``

The resolution is a check, then a use; a process racing the harness inside the workspace (one
left over from a command) could swap a component for a symlink in between. So the use never goes
by the absolute path: given a :class:`~services.execution.confinement_root.RootHandle` (the
execution's open root), a :class:`ResolvedPath` opens itself, or its parent directory, beneath
that handle with no symlink followed (:meth:`ResolvedPath.open`, :meth:`ResolvedPath.parent`),
and a swapped component makes the call fail instead of leaving the workspace.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path, PurePosixPath

from services.execution.confinement_root import RootHandle
from services.execution.errors import ConfinementViolation, ErrorCode

MAX_PATH_LENGTH = 4096
MAX_COMPONENT_BYTES = 255
MAX_SYMLINK_HOPS = 40
GIT_DIR_NAME = ".git"
WORKFLOWS_PREFIX = (".github", "workflows")


class Access(StrEnum):
    """What the caller is about to do with the path."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class ResolvedPath:
    """A path proven to be inside the workspace."""

    root: Path
    absolute: Path
    relative: PurePosixPath
    handle: RootHandle | None = field(default=None, compare=False, repr=False)

    @property
    def display(self) -> str:
        """The workspace-relative spelling shown to models and users."""
        text = self.relative.as_posix()
        return "." if text in ("", ".") else text

    def exists(self) -> bool:
        return os.path.lexists(self.absolute)

    def open(self, flags: int, mode: int = 0o666) -> int:
        """Open this path (never through a symlink), beneath the root handle when there is one."""
        if self.handle is not None:
            return self.handle.open(self.relative, flags, mode)
        return os.open(self.absolute, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode)

    @contextmanager
    def parent(self) -> Iterator[tuple[int, str]]:
        """``(directory descriptor, name)`` for the ``*at`` calls that act on the entry itself."""
        if self.handle is not None:
            fd, name = self.handle.parent(self.relative)
        else:
            fd = os.open(self.absolute.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            name = self.absolute.name
        try:
            yield fd, name
        finally:
            os.close(fd)

    def child(self, relative: PurePosixPath, absolute: Path) -> ResolvedPath:
        """Another resolved path under the same root and handle."""
        return ResolvedPath(self.root, absolute, relative, self.handle)


def real_root(root: Path | str) -> Path:
    """The workspace root with every symlink resolved; it must be an existing directory."""
    resolved = Path(os.path.realpath(root))
    if not resolved.is_dir():
        raise ConfinementViolation(
            f"workspace root {root} is not a directory", code=ErrorCode.PATH_NOT_FOUND
        )
    return resolved


def _encoded(raw: str) -> bytes:
    """The bytes the OS sees; a lone surrogate (legal in JSON) has none and is refused here."""
    try:
        return raw.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ConfinementViolation(
            "path is not encodable (lone surrogate)", code=ErrorCode.INVALID_ARGUMENTS
        ) from None


def _check_text(raw: str) -> None:
    if "\x00" in raw:
        raise ConfinementViolation("path contains a NUL byte", code=ErrorCode.INVALID_ARGUMENTS)
    if len(_encoded(raw)) > MAX_PATH_LENGTH:
        raise ConfinementViolation(
            f"path is longer than {MAX_PATH_LENGTH} bytes", code=ErrorCode.INVALID_ARGUMENTS
        )
    for part in raw.split("/"):
        if len(_encoded(part)) > MAX_COMPONENT_BYTES:
            raise ConfinementViolation(
                f"a path component is longer than {MAX_COMPONENT_BYTES} bytes",
                code=ErrorCode.INVALID_ARGUMENTS,
            )


def _strip_root_prefix(raw: str, roots: tuple[str, ...]) -> str:
    """An absolute path is accepted only when it is lexically under the root."""
    for prefix in roots:
        if raw == prefix:
            return ""
        if raw.startswith(prefix.rstrip("/") + "/"):
            return raw[len(prefix.rstrip("/")) + 1 :]
    raise ConfinementViolation(
        "absolute path is outside the workspace", details={"path": raw}
    )


def _outside(raw: str, reason: str) -> ConfinementViolation:
    return ConfinementViolation(
        f"path leads outside the workspace ({reason})", details={"path": raw}
    )


def _walk_components(root: Path, raw: str, relative: str, follow_final: bool) -> Path:
    """Resolve ``relative`` under ``root`` one component at a time, following symlinks."""
    roots = (str(root),)
    pending = [c for c in reversed(relative.split("/"))]
    current = root
    hops = 0
    while pending:
        part = pending.pop()
        if part in ("", "."):
            continue
        if part == "..":
            if current == root:
                raise _outside(raw, "'..' above the workspace root")
            current = current.parent
            continue
        candidate = current / part
        is_final = not any(p not in ("", ".") for p in pending)
        if not os.path.islink(candidate) or (is_final and not follow_final):
            current = candidate
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            raise _outside(raw, "too many levels of symbolic links")
        target = os.readlink(candidate)
        if "\x00" in target:
            raise _outside(raw, "symlink target contains a NUL byte")
        if target.startswith("/"):
            try:
                target = _strip_root_prefix(target, roots)
            except ConfinementViolation:
                raise _outside(raw, f"symlink {part!r} points outside") from None
            current = root
        pending.extend(reversed(target.split("/")))
    return current


def _check_protected(raw: str, relative: PurePosixPath, access: Access, allow_git: bool,
                     allow_workflows: bool) -> None:
    lowered = tuple(p.casefold() for p in relative.parts)
    if not allow_git and GIT_DIR_NAME in lowered:
        raise ConfinementViolation(
            "the .git directory is closed to this tool", code=ErrorCode.PROTECTED_PATH,
            details={"path": raw},
        )
    if access is Access.WRITE and not allow_workflows and lowered[:2] == WORKFLOWS_PREFIX:
        raise ConfinementViolation(
            "changes under .github/workflows/ are not allowed for this execution",
            code=ErrorCode.PROTECTED_PATH, details={"path": raw},
        )


def check_protected(
    raw: str,
    relative: PurePosixPath,
    *,
    access: Access,
    allow_git_internals: bool = False,
    allow_workflows: bool = False,
) -> None:
    """Refuse (``protected_path``) a workspace-relative path that is closed to ``access``.

    For callers that act on a whole subtree (recursive delete, move, copy of a directory): each
    path inside the subtree, not just its top, has to pass.
    """
    _check_protected(raw, relative, access, allow_git_internals, allow_workflows)


def _check_file_type(raw: str, absolute: Path) -> None:
    try:
        mode = os.lstat(absolute).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # nothing there (``file.txt/x`` included): the caller reports it on use
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)):
        raise ConfinementViolation(
            "device files, FIFOs and sockets are not accessible",
            code=ErrorCode.UNSUPPORTED_FILE_TYPE, details={"path": raw},
        )


def resolve_path(
    root: Path | str | RootHandle,
    raw: str,
    *,
    access: Access = Access.READ,
    follow_final: bool = True,
    allow_git_internals: bool = False,
    allow_workflows: bool = False,
) -> ResolvedPath:
    """Resolve ``raw`` (relative to the root, or absolute under it) to a path inside ``root``.

    ``follow_final=False`` resolves the parents but keeps a final symlink itself (to delete,
    move or stat the link rather than its target). Given a :class:`RootHandle`, the answer
    opens itself beneath it.
    """
    if not isinstance(raw, str):
        raise ConfinementViolation("path must be a string", code=ErrorCode.INVALID_ARGUMENTS)
    _check_text(raw)
    handle: RootHandle | None = None
    if isinstance(root, RootHandle):
        handle, root_real, spelled = root, root.check(), str(root.path)
    else:
        root_real, spelled = real_root(root), os.path.abspath(root)
    relative = raw
    if raw.startswith("/"):
        prefixes = tuple(dict.fromkeys((str(root_real), spelled)))
        relative = _strip_root_prefix(raw, prefixes)
    absolute = _walk_components(root_real, raw, relative, follow_final)
    if absolute != root_real and root_real not in absolute.parents:
        raise _outside(raw, "resolves outside the root")
    rel = PurePosixPath(absolute.relative_to(root_real).as_posix())
    _check_protected(raw, rel, access, allow_git_internals, allow_workflows)
    _check_file_type(raw, absolute)
    return ResolvedPath(root=root_real, absolute=absolute, relative=rel, handle=handle)


@dataclass(frozen=True)
class TreeEntry:
    """One entry found by :func:`walk`."""

    path: ResolvedPath
    kind: str  # "file" | "dir" | "symlink"
    size: int


@dataclass
class WalkReport:
    """What a traversal skipped, and why (reported to the model)."""

    skipped_outside: int = 0
    skipped_protected: int = 0
    skipped_special: int = 0
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, int]:
        return {
            "skipped_outside": self.skipped_outside,
            "skipped_protected": self.skipped_protected,
            "skipped_special": self.skipped_special,
        }


def _entry_for(start: ResolvedPath, directory: ResolvedPath, dirent: os.DirEntry[str],
               report: WalkReport) -> TreeEntry | None:
    rel = directory.relative / dirent.name
    here = start.child(rel, directory.absolute / dirent.name)
    if any(p.casefold() == GIT_DIR_NAME for p in rel.parts):
        report.skipped_protected += 1
        return None
    if dirent.is_symlink():
        try:
            target = resolve_path(start.handle or start.root, rel.as_posix())
        except ConfinementViolation as exc:
            if exc.code is ErrorCode.PROTECTED_PATH:
                report.skipped_protected += 1
            elif exc.code is ErrorCode.UNSUPPORTED_FILE_TYPE:
                report.skipped_special += 1
            else:
                report.skipped_outside += 1
            return None
        size = target.absolute.stat().st_size if target.absolute.is_file() else 0
        return TreeEntry(here, "symlink", size)
    st = dirent.stat(follow_symlinks=False)
    if stat.S_ISDIR(st.st_mode):
        return TreeEntry(here, "dir", 0)
    if stat.S_ISREG(st.st_mode):
        return TreeEntry(here, "file", st.st_size)
    report.skipped_special += 1
    return None


def walk(
    start: ResolvedPath,
    *,
    recursive: bool,
    include_hidden: bool = True,
    report: WalkReport | None = None,
) -> Iterator[TreeEntry]:
    """Entries under ``start`` (a directory), never following symlinked directories.

    Symlinks are yielded only when their target is inside the root; others are skipped and
    counted in ``report``. ``.git`` is never entered.
    """
    report = report if report is not None else WalkReport()
    stack = [start]
    while stack:
        directory = stack.pop()
        try:
            dirents = _listing(directory)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        subdirs: list[ResolvedPath] = []
        for dirent in dirents:
            if not include_hidden and dirent.name.startswith("."):
                continue
            entry = _entry_for(start, directory, dirent, report)
            if entry is None:
                continue
            yield entry
            if recursive and entry.kind == "dir":
                subdirs.append(entry.path)
        stack.extend(reversed(subdirs))


def _listing(directory: ResolvedPath) -> list[os.DirEntry[str]]:
    """A directory's entries, read through a descriptor opened beneath the root (a directory
    swapped for a symlink to elsewhere is refused, not listed)."""
    try:
        fd = directory.open(os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotADirectoryError(exc.errno, exc.strerror) from None
        raise
    try:
        with os.scandir(fd) as it:
            dirents = sorted(it, key=lambda d: d.name)
        for dirent in dirents:  # DirEntry stats lazily through the descriptor: do it now
            dirent.stat(follow_symlinks=False)
        return dirents
    finally:
        os.close(fd)
