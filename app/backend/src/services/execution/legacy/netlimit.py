"""Inside the sandbox, before the CLI starts: TCP connections only to the relay's port.

Under bubblewrap the CLI has a network namespace of its own (a loopback interface only); the one
thing it must reach is the relay to the harness's model proxy (:mod:`.relay`). A small Python
program runs first inside the sandbox (the harness's own interpreter, ``-I -S``, nothing imported
beyond ``ctypes``): it creates a Landlock ruleset (ABI 4 or later) that handles TCP ``connect`` and
allows it to the given ports only, sets no-new-privileges, restricts itself and ``exec``\\ s the
CLI. The restriction holds for the CLI and every command it starts, a second bound under the
namespace's; with ABI 6, abstract Unix sockets and signals outside the CLI's own domain are
refused too. On a kernel without Landlock network rules the program refuses to start the CLI
(exit code 97).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.execution.sandbox.layout import sandbox_python

NO_LANDLOCK_EXIT = 97

PROGRAM = r"""
import ctypes, os, sys
ports = [int(p) for p in sys.argv[1].split(",") if p]
argv = sys.argv[3:]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
if abi < 4:
    sys.stderr.write("studio: Landlock network rules unavailable (ABI %d); refusing\n" % abi)
    sys.exit(97)
class Attr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]
class Port(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("access", ctypes.c_uint64), ("port", ctypes.c_uint64)]
CONNECT = 0x2
# ABI 6: no abstract Unix socket (the shared network namespace holds the host's) nor signal
# outside the CLI's own domain
attr = Attr(0, CONNECT, 0x1 | 0x2 if abi >= 6 else 0)
size = ctypes.sizeof(attr) if abi >= 6 else 16
fd = libc.syscall(444, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
if fd < 0:
    sys.stderr.write("studio: landlock_create_ruleset failed: %d\n" % ctypes.get_errno())
    sys.exit(97)
for port in ports:
    rule = Port(CONNECT, port)
    if libc.syscall(445, ctypes.c_int(fd), ctypes.c_int(2), ctypes.byref(rule),
                    ctypes.c_uint32(0)) != 0:
        sys.stderr.write("studio: landlock_add_rule failed: %d\n" % ctypes.get_errno())
        sys.exit(97)
if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.syscall(446, ctypes.c_int(fd),
                                                   ctypes.c_uint32(0)) != 0:
    sys.stderr.write("studio: landlock_restrict_self failed: %d\n" % ctypes.get_errno())
    sys.exit(97)
os.close(fd)
os.execv(argv[0], argv)
"""


def limited(argv: Sequence[str], ports: Sequence[int], python: str | None = None) -> list[str]:
    """``argv`` started through :data:`PROGRAM`, TCP connect allowed to ``ports`` only."""
    interpreter = python or sandbox_python()
    joined = ",".join(str(p) for p in sorted(set(ports)))
    return [interpreter, "-I", "-S", "-c", PROGRAM, joined, "--", *argv]
