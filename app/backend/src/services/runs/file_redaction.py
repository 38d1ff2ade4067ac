"""Secrets out of a directory tree a model or an agent CLI could have written (a CLI's private
home, a provider transcript), without ever leaving that tree.

The walk opens the root once (``O_DIRECTORY | O_NOFOLLOW``) and everything beneath it relative to
the open directory (``dir_fd``), each name with ``O_NOFOLLOW`` and checked with ``fstat``, so a
symlink planted in the tree, or a directory swapped for one while the walk runs, never takes it to
a host file. What it finds:

- a regular file up to :data:`MAX_FILE_BYTES`: read, redacted, and, when something was
  redacted, replaced by a new file renamed over it (a hard link to a file elsewhere keeps its
  own content: only the tree's name moves to the new inode);
- a regular file over the cap, a symlink, a FIFO, a socket or a device: removed (it cannot be
  redacted without reading it whole or following it; nothing of the tree is worth a host file);
- a directory: walked, to :data:`MAX_DEPTH` levels and :data:`MAX_ENTRIES` entries in all;
  anything past those bounds is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shutil
import stat
from pathlib import Path

from services.db.redaction import Redactor

MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 32
MAX_ENTRIES = 100_000

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Budget:
    def __init__(self) -> None:
        self.entries = 0


def redact_tree(directory: Path, redactor: Redactor) -> None:
    """Every known secret out of the files under ``directory`` (see the module docstring); a
    missing directory, or one that is itself a symlink, is left alone."""
    try:
        root = os.open(directory, _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the root itself is a link: nothing of ours beneath it
            return
        raise
    try:
        _walk(root, redactor, 0, _Budget())
    finally:
        os.close(root)



def _walk(fd: int, redactor: Redactor, depth: int, budget: _Budget) -> None:
    for name in os.listdir(fd):
        budget.entries += 1
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            if depth + 1 >= MAX_DEPTH or budget.entries > MAX_ENTRIES:
                _remove_dir(fd, name)
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:  # swapped for a link or a file meanwhile
                _unlink(fd, name)
                continue
            try:
                _walk(child, redactor, depth + 1, budget)
            finally:
                os.close(child)
        elif stat.S_ISREG(info.st_mode) and info.st_size <= MAX_FILE_BYTES \
                and budget.entries <= MAX_ENTRIES:
            _redact_file(fd, name, redactor)
        else:
            _unlink(fd, name)


def _redact_file(fd: int, name: str, redactor: Redactor) -> None:
    try:
        file = os.open(name, _READ_FLAGS, dir_fd=fd)
    except OSError:  # a link or a FIFO swapped in after the stat
        _unlink(fd, name)
        return
    try:
        info = os.fstat(file)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            _unlink(fd, name)
            return
        data = _read_capped(file)
    finally:
        os.close(file)
    if data is None:
        _unlink(fd, name)
        return
    text = data.decode("utf-8", errors="replace")
    cleaned = redactor.text(text)
    if cleaned == text:
        return
    temporary = f".{name[:100]}.redact-{secrets.token_hex(6)}"
    out = os.open(temporary, _NEW_FLAGS, 0o600, dir_fd=fd)
    try:
        with open(out, "wb", closefd=False) as stream:
            stream.write(cleaned.encode("utf-8"))
    except BaseException:
        os.close(out)
        _unlink(fd, temporary)
        raise
    os.close(out)
    os.rename(temporary, name, src_dir_fd=fd, dst_dir_fd=fd)


def _read_capped(file: int) -> bytes | None:
    """The whole file, or ``None`` once it grows past the cap while being read."""
    chunks: list[bytes] = []
    total = 0
    while chunk := os.read(file, 1024 * 1024):
        total += len(chunk)
        if total > MAX_FILE_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _unlink(fd: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
        os.unlink(name, dir_fd=fd)


def _remove_dir(fd: int, name: str) -> None:
    """A directory past the walk's bounds, removed without following anything in it
    (``shutil.rmtree`` relative to ``fd`` opens each level with ``O_NOFOLLOW``)."""
    with contextlib.suppress(OSError, RecursionError):
        shutil.rmtree(name, dir_fd=fd)
