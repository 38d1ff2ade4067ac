"""Low-level file access for the workspace domain, always behind :mod:`confinement`.

Every helper takes a :class:`ResolvedPath` (never a raw string), opens the final component with
``O_NOFOLLOW`` and checks with ``fstat`` that it got a regular file, so a link or a FIFO swapped in
after resolution makes the call fail instead of leaving the workspace or blocking. OS errors are
translated here, in one place, into tool failures whose messages carry workspace-relative paths
only (an ``OSError``'s own text would carry the absolute path).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from services.execution.confinement import Access, ResolvedPath, check_protected, resolve_path
from services.execution.errors import ConfinementViolation, ErrorCode, ToolFailure
from services.execution.tool_domains.context import ToolDomainContext

MAX_FILE_BYTES = 10 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def resolve(ctx: ToolDomainContext, raw: str, *, write: bool = False,
            follow_final: bool = True) -> ResolvedPath:
    """The one way this domain turns an argument into a path."""
    return resolve_path(
        ctx.root_handle(), raw,
        access=Access.WRITE if write else Access.READ,
        follow_final=follow_final,
        allow_workflows=ctx.allow_workflow_changes,
    )


def failure(code: ErrorCode, message: str, path: ResolvedPath | str,
            **details: object) -> ToolFailure:
    shown = path.display if isinstance(path, ResolvedPath) else path
    return ToolFailure(code, message, details={"path": shown, **details})


_ERRNO_CODES: dict[int, tuple[ErrorCode, str]] = {
    errno.ENOENT: (ErrorCode.PATH_NOT_FOUND, "no such file or directory"),
    errno.ENOTDIR: (ErrorCode.NOT_A_DIRECTORY, "a parent is not a directory"),
    errno.EISDIR: (ErrorCode.NOT_A_FILE, "is a directory"),
    errno.EEXIST: (ErrorCode.PATH_EXISTS, "already exists"),
    errno.ENOTEMPTY: (ErrorCode.INVALID_ARGUMENTS, "directory is not empty"),
    errno.ENAMETOOLONG: (ErrorCode.INVALID_ARGUMENTS, "name too long"),
    errno.EFBIG: (ErrorCode.FILE_TOO_LARGE, "file too large"),
}


@contextmanager
def os_errors(path: ResolvedPath | str) -> Iterator[None]:
    """Translate ``OSError`` into a :class:`ToolFailure` about ``path``."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            shown = path.display if isinstance(path, ResolvedPath) else path
            raise ConfinementViolation(
                "a symbolic link appeared at the final component", details={"path": shown}
            ) from None
        code, text = _ERRNO_CODES.get(
            exc.errno or 0, (ErrorCode.INTERNAL_ERROR, errno.errorcode.get(exc.errno or 0, "?"))
        )
        raise failure(code, text, path) from None


def _open_regular(target: ResolvedPath, flags: int) -> tuple[int, os.stat_result]:
    with os_errors(target):
        fd = target.open(flags, 0o666)
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode):
        return fd, st
    os.close(fd)
    if stat.S_ISDIR(st.st_mode):
        raise failure(ErrorCode.NOT_A_FILE, "is a directory", target)
    raise ConfinementViolation("device files, FIFOs and sockets are not accessible",
                               code=ErrorCode.UNSUPPORTED_FILE_TYPE,
                               details={"path": target.display})


def read_regular(target: ResolvedPath, max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The whole content of a regular file, refused past ``max_bytes``."""
    fd, st = _open_regular(target, _READ_FLAGS)
    with os.fdopen(fd, "rb") as handle:
        if st.st_size > max_bytes:
            raise failure(ErrorCode.FILE_TOO_LARGE, f"file is larger than {max_bytes} bytes",
                          target, size=st.st_size, max_bytes=max_bytes)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise failure(ErrorCode.FILE_TOO_LARGE, f"file is larger than {max_bytes} bytes",
                      target, max_bytes=max_bytes)
    return data


def is_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


def read_text(target: ResolvedPath, max_bytes: int = MAX_FILE_BYTES,
              errors: str = "replace") -> str:
    """A text file's content; binary files are refused with ``file_too_large``.

    ``errors="surrogateescape"`` keeps invalid UTF-8 bytes so an edit writes them back unchanged.
    """
    data = read_regular(target, max_bytes)
    if is_binary(data):
        raise failure(ErrorCode.FILE_TOO_LARGE, "binary file", target, reason="binary")
    return data.decode("utf-8", errors=errors)


def _make_dirs(target: ResolvedPath, relative: PurePosixPath) -> None:
    """Create ``relative`` and its missing parents, each beneath the root, following no link."""
    parts = relative.parts
    for depth in range(1, len(parts) + 1):
        step = target.child(PurePosixPath(*parts[:depth]), target.root.joinpath(*parts[:depth]))
        try:
            os.close(step.open(os.O_PATH | os.O_DIRECTORY))
            continue
        except FileNotFoundError:
            pass
        with step.parent() as (dir_fd, name), contextlib.suppress(FileExistsError):
            os.mkdir(name, dir_fd=dir_fd)


def make_dirs(target: ResolvedPath) -> None:
    """Create the directory ``target`` and its missing parents."""
    with os_errors(target):
        _make_dirs(target, target.relative)


def make_parents(target: ResolvedPath) -> None:
    """Create the missing parents of ``target`` (they resolved inside the root)."""
    try:
        with os_errors(target):
            _make_dirs(target, target.relative.parent)
    except ToolFailure as exc:
        if exc.code is ErrorCode.PATH_EXISTS:  # a parent is a file
            raise failure(ErrorCode.NOT_A_DIRECTORY, "a parent is not a directory",
                          target) from None
        raise


DISK_RESERVE_BYTES = 64 * 1024 * 1024


def check_room(ctx: ToolDomainContext, planned: int, target: ResolvedPath,
               cap: int | None = None) -> None:
    """Refuse a write of ``planned`` bytes before any is written: over ``cap``, over what the
    file system has left (keeping a reserve), or refused by the execution's disk check."""
    if cap is not None and planned > cap:
        raise failure(ErrorCode.FILE_TOO_LARGE, f"would write {planned} bytes, over the cap "
                      f"of {cap}", target, size=planned, max_bytes=cap)
    free = os.statvfs(target.root)
    if planned + DISK_RESERVE_BYTES > free.f_bavail * free.f_frsize:
        raise failure(ErrorCode.FILE_TOO_LARGE, "not enough free disk space for this write",
                      target, size=planned, reason="disk_full")
    if ctx.disk_check is not None:
        ctx.disk_check(planned)


def write_regular(target: ResolvedPath, data: bytes, *, exclusive: bool = False,
                  mode: int = 0o666) -> bool:
    """Write ``data`` to ``target``, creating parents; returns whether the file was created."""
    make_parents(target)
    created = not os.path.lexists(target.absolute)
    flags = _WRITE_FLAGS | (os.O_EXCL if exclusive else 0)
    fd, _st = _open_regular(target, flags)
    with os.fdopen(fd, "wb") as handle:
        handle.truncate(0)
        handle.write(data)
        if created and mode != 0o666:
            os.fchmod(handle.fileno(), mode & 0o777)
    return created


def copy_regular(source: ResolvedPath, destination: ResolvedPath) -> int:
    """Copy one regular file (content and permission bits); returns the bytes copied."""
    src_fd, st = _open_regular(source, _READ_FLAGS)
    with os.fdopen(src_fd, "rb") as src:
        make_parents(destination)
        dst_fd, _ = _open_regular(destination, _WRITE_FLAGS | os.O_EXCL)
        with os.fdopen(dst_fd, "wb") as dst:
            copied = 0
            # Never more than the size checked before the copy, should the file grow meanwhile.
            while copied < st.st_size and (chunk := src.read(min(1024 * 1024,
                                                                 st.st_size - copied))):
                dst.write(chunk)
                copied += len(chunk)
            # Never the set-user/group-ID or sticky bits: a set-user-ID copy would run as its
            # owner (the harness, maybe root) for anyone outside.
            os.fchmod(dst.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
    return copied


def subtree(absolute: Path) -> list[PurePosixPath]:
    """Every entry under a real directory, relative to it (symlinks listed, never entered)."""
    found: list[PurePosixPath] = []
    for directory, dirnames, filenames in os.walk(absolute, followlinks=False):
        base = PurePosixPath(Path(directory).relative_to(absolute).as_posix())
        found.extend(base / name for name in (*dirnames, *filenames))
    return found


def guard_subtree(ctx: ToolDomainContext, raw: str, base: PurePosixPath,
                  entries: list[PurePosixPath]) -> None:
    """Refuse a change that would touch ``.git`` or (unless allowed) ``.github/workflows``
    anywhere in a subtree placed at, or removed from, ``base``."""
    for entry in [PurePosixPath("."), *entries]:
        check_protected(raw, base / entry, access=Access.WRITE,
                        allow_workflows=ctx.allow_workflow_changes)


def lstat_entry(target: ResolvedPath) -> os.stat_result:
    """``lstat`` of the entry itself, through its parent opened beneath the root."""
    if target.display == ".":
        fd = target.open(os.O_PATH | os.O_DIRECTORY)
        try:
            return os.fstat(fd)
        finally:
            os.close(fd)
    with os_errors(target), target.parent() as (dir_fd, name):
        return os.lstat(name, dir_fd=dir_fd)


def kind_of(absolute: Path) -> str:
    """``file``, ``dir``, ``symlink`` or ``other`` for an existing entry (not following)."""
    return kind_of_mode(os.lstat(absolute).st_mode)


def kind_of_mode(mode: int) -> str:
    """``file``, ``dir``, ``symlink`` or ``other`` for an ``st_mode``."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    return "file" if stat.S_ISREG(mode) else "other"
