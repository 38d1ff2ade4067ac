"""What a process forked by a warm server does to become its command: read its request from a
stream socket, close what it inherited, and write its command line over the server's.

Shared by the worker's fork server (:mod:`services.cli.fork_server`) and the test suite's warm
CLI launcher (``tests/support/warm_cli_server.py``). Standard library only: a fork server imports
this before its warm-up, and nothing here may hold a secret or start a thread.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Collection
from pathlib import Path

ARG_START = 45  # arg_start, arg_end: fields 48 and 49 of /proc/<pid>/stat, 45 and 46 after ")"
PR_SET_MM = 35
PR_SET_MM_ARG_END = 9


def read_exactly(channel: socket.socket, size: int, closed: str) -> bytes:
    """``size`` bytes from ``channel``; :class:`EOFError` saying ``closed`` if it ends first."""
    data = bytearray()
    while len(data) < size:
        chunk = channel.recv(size - len(data))
        if not chunk:
            raise EOFError(closed)
        data.extend(chunk)
    return bytes(data)


def close_all_but(keep: Collection[int]) -> None:
    """Close every descriptor of this process but ``keep`` (0, 1 and 2 are closed unless kept)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)


def retitle(argv: list[str], *, trim: bool = False) -> None:
    """Write ``argv`` over this process's command line (``/proc/self/cmdline``), in the room the
    server's last argument left; with ``trim``, also end the command line there when the kernel
    lets us (``PR_SET_MM``; else it keeps NUL padding). Nothing when it does not fit or the
    kernel does not allow it."""
    try:
        stat = Path("/proc/self/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        start, end = int(fields[ARG_START]), int(fields[ARG_START + 1])
        title = b"\0".join(part.encode() for part in argv) + b"\0"
        if len(title) > end - start:
            return
        with open("/proc/self/mem", "r+b", buffering=0) as memory:
            memory.seek(start)
            memory.write(title.ljust(end - start, b"\0"))
        if trim:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(ctypes.c_int(PR_SET_MM), ctypes.c_ulong(PR_SET_MM_ARG_END),
                       ctypes.c_ulong(start + len(title)), ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, ValueError, IndexError):
        pass
