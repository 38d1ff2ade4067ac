"""One resolved workspace root, held open for the life of an execution.

:class:`RootHandle` opens the root directory once (``O_PATH``) and remembers its identity (device
and inode). Every later use goes through that descriptor:

* :meth:`RootHandle.open` opens a path *beneath* the handle, following no symbolic link at all:
  ``openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`` where the kernel has it (Linux 5.6+, called
  through ``syscall(437)`` because Python's ``os`` has no wrapper), otherwise a walk that opens
  each component with ``O_NOFOLLOW`` relative to the previous one. Paths handed to it were
  already resolved by :func:`~services.execution.confinement.resolve_path`, so they hold no link
  to follow; a directory swapped for a symlink between that check and this use (by a process
  racing the harness) makes the open fail with ``ELOOP`` instead of leaving the workspace.
* :meth:`RootHandle.parent` opens the parent directory of an entry the same way, for the
  ``*at`` calls (``unlink``, ``rename``, ``mkdir``, ``lstat``...) that act on the entry itself.
* :meth:`RootHandle.check` refuses a root path that no longer names the directory first opened.

A root that is ``/``, an ancestor of (or equal to) the directory holding the workspaces, or
outside it, is refused by :func:`validate_root`.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import weakref
from pathlib import Path, PurePosixPath

from services.execution.errors import ConfinementViolation, ErrorCode

_SYS_OPENAT2 = {"x86_64": 437, "aarch64": 437}
_RESOLVE_NO_XDEV = 0x01
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_RESOLVE = _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS
_DIR_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    creates = flags & os.O_CREAT or flags & os.O_TMPFILE == os.O_TMPFILE  # O_TMPFILE has
    how = _OpenHow(flags | os.O_CLOEXEC, mode if creates else 0, _RESOLVE)  # O_DIRECTORY in it
    fd = int(_libc().syscall(_SYS_OPENAT2[platform.machine()], ctypes.c_int(dir_fd),
                             os.fsencode(path), ctypes.byref(how), ctypes.c_size_t(24)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


@functools.cache
def openat2_available() -> bool:
    """Whether this kernel answers ``openat2`` (checked once per process)."""
    if platform.machine() not in _SYS_OPENAT2:
        return False
    top = os.open("/", _DIR_FLAGS)
    try:
        os.close(_openat2(top, ".", os.O_PATH, 0))
    except OSError as exc:
        return exc.errno not in (errno.ENOSYS, errno.EPERM)
    finally:
        os.close(top)
    return True


def _walk_open(dir_fd: int, parts: tuple[str, ...], flags: int, mode: int) -> int:
    """The fallback: each directory opened with ``O_NOFOLLOW`` beneath the previous one."""
    current = dir_fd
    try:
        for part in parts[:-1]:
            following = os.open(part, _DIR_FLAGS, dir_fd=current)
            if current != dir_fd:
                os.close(current)
            current = following
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=current)
    finally:
        if current != dir_fd:
            os.close(current)


def _parts(relative: PurePosixPath | str) -> tuple[str, ...]:
    parts = tuple(p for p in PurePosixPath(relative).parts if p not in ("", "."))
    if any(p == ".." or p.startswith("/") for p in parts):
        raise ConfinementViolation("path leads outside the workspace ('..' or absolute)",
                                   details={"path": str(relative)})
    return parts


class RootHandle:
    """An open workspace root: the resolved path and a descriptor checked against it."""

    def __init__(self, root: Path | str) -> None:
        path = Path(os.path.realpath(root))
        try:
            fd = os.open(path, _DIR_FLAGS)
        except OSError:
            raise ConfinementViolation(f"workspace root {root} is not a directory",
                                       code=ErrorCode.PATH_NOT_FOUND) from None
        self.path = path
        self.fd = fd
        st = os.fstat(fd)
        self.identity = (st.st_dev, st.st_ino)
        self._finalizer = weakref.finalize(self, os.close, fd)

    def close(self) -> None:
        self._finalizer()

    def check(self) -> Path:
        """The root path, after checking it still names the directory first opened."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except OSError:
            st = None
        if st is None or (st.st_dev, st.st_ino) != self.identity:
            raise ConfinementViolation(
                "the workspace root was replaced during the execution",
                details={"path": str(self.path)},
            )
        return self.path

    def open(self, relative: PurePosixPath | str, flags: int, mode: int = 0o666) -> int:
        """Open ``relative`` beneath the root, following no symlink (``ELOOP`` if one is met)."""
        parts = _parts(relative)
        if not parts:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=self.fd)
        if openat2_available():
            return _openat2(self.fd, "/".join(parts), flags, mode)
        return _walk_open(self.fd, parts, flags, mode)

    def parent(self, relative: PurePosixPath | str) -> tuple[int, str]:
        """An ``O_PATH`` descriptor of the entry's directory and the entry's name.

        The caller closes the descriptor. The root itself has no parent in the workspace.
        """
        parts = _parts(relative)
        if not parts:
            raise ConfinementViolation("the workspace root has no parent inside it",
                                       code=ErrorCode.PROTECTED_PATH)
        directory = self.open(PurePosixPath(*parts[:-1]) if len(parts) > 1 else ".", _DIR_FLAGS)
        return directory, parts[-1]


def validate_root(root: Path | str, *, base: Path | str | None = None) -> Path:
    """Refuse a workspace root that is ``/``, or (given ``base``, the directory holding the
    workspaces) is ``base`` itself, one of its ancestors, or not beneath it."""
    real = Path(os.path.realpath(root))
    if real == Path("/"):
        raise ConfinementViolation("the file system root cannot be a workspace",
                                   details={"path": str(root)})
    if base is not None:
        real_base = Path(os.path.realpath(base))
        if real_base not in real.parents:
            raise ConfinementViolation(
                "the workspace root must be a directory beneath the workspaces directory",
                details={"path": str(root)},
            )
    return real
