"""Inside the sandbox, before the CLI starts: TCP connections only to its model's ports.

Under bubblewrap the CLI keeps the host's network namespace (it must reach its model). A small
Python program runs first inside the sandbox (the harness's own interpreter, ``-I -S``, nothing
imported beyond ``ctypes``): it creates a Landlock ruleset (ABI 4 or later) that handles TCP
``connect`` and allows it to the given ports only, sets no-new-privileges, restricts itself and
``exec``\\ s the CLI. The restriction holds for the CLI and every command it starts, so none of
them reaches a database, Redis or a metadata service on another port (loopback included); with
ABI 6, abstract Unix sockets (the host's live in the shared network namespace) and signals
outside the CLI's own domain are refused too. UDP (DNS) is not covered by Landlock. On a
kernel without Landlock network rules the program refuses to start the CLI (exit code 97).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

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


def url_port(url: str | None, default: int = 443) -> int:
    """The TCP port of ``url`` (its scheme's default when it names none)."""
    if not url:
        return default
    parts = urlsplit(url)
    if parts.port is not None:
        return parts.port
    return 80 if parts.scheme == "http" else 443


PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")


def endpoint_ports(environ: Mapping[str, str], base_url_variable: str) -> list[int]:
    """The ports a CLI needs: its model's (from ``base_url_variable``) and any proxy's."""
    ports = [url_port(environ.get(base_url_variable))]
    ports += [url_port(environ[name]) for name in PROXY_VARIABLES if environ.get(name)]
    return ports


def limited(argv: Sequence[str], ports: Sequence[int], python: str | None = None) -> list[str]:
    """``argv`` started through :data:`PROGRAM`, TCP connect allowed to ``ports`` only."""
    interpreter = python or sandbox_python()
    joined = ",".join(str(p) for p in sorted(set(ports)))
    return [interpreter, "-I", "-S", "-c", PROGRAM, joined, "--", *argv]
