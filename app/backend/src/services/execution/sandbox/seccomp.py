"""The seccomp filter every sandboxed command runs under, as classic BPF built by hand.

The program is a short list of system calls that a build or a test never needs and that a hostile
command would use to reach past its sandbox: key rings, ``ptrace``, mounts and the new mount API,
module loading, ``kexec``, ``bpf``, ``userfaultfd``, ``perf_event_open``, ``io_uring`` (whose
requests no filter can see), new namespaces (``unshare``, ``setns``, ``clone`` with a namespace
flag), and every way of giving a file the set-user-ID or set-group-ID bit (``chmod`` family, and a
create with such a mode through ``open``/``openat``/``creat``/``mknod``). They fail with ``EPERM``.
``clone3`` and ``openat2`` take their flags in a structure a filter cannot read: they fail with
``ENOSYS``, and the C library falls back to ``clone`` and ``openat``, which are checked.

The **offline** variant (:func:`build_program` with ``offline=True``) is the one the Landlock
sandbox loads: there the command shares the harness's network namespace, and Landlock covers TCP
``bind``/``connect`` only, not Unix sockets nor UDP. On top of the list above it answers
``EACCES`` to every ``socket()`` but a TCP one (``AF_INET``/``AF_INET6``, ``SOCK_STREAM``,
protocol 0 or ``IPPROTO_TCP``): no pathname or abstract Unix socket (a host's PostgreSQL socket
with peer authentication), no UDP (DNS included), no netlink, packet, vsock or any other family;
to ``socketpair`` of a datagram type (a datagram socket could ``sendto`` any pathname socket; the
stream and seqpacket pairs that pipes, ``asyncio`` and ``libuv`` use stay allowed, and their
sockets, being connected, cannot be pointed elsewhere); to ``listen`` (a listening TCP socket is
bound to an ephemeral port without a ``bind`` Landlock would see); to ``sendto``/``sendmsg``/
``sendmmsg`` with ``MSG_FASTOPEN`` (a connect inside a send); and to ``pidfd_getfd`` (another
process's descriptors: Landlock's ptrace scoping refuses it already). A command starts with no
socket but its pipes (the harness closes every other descriptor), so these calls are its only way
to one.
Bubblewrap keeps the plain program: its command has a network namespace of its own (nothing but
``lo``) and no host path where a socket could be (``/run``, ``/var`` and ``/tmp`` are not the
host's), and the egress relay of :mod:`~services.execution.sandbox.egress` needs a Unix socket.

The program is built once per process for the host's architecture (x86_64 or aarch64); a call
made under any other architecture (a 32-bit ABI, x32) kills the process. Bubblewrap loads it
(``--seccomp FD``) just before it executes the command; the Landlock sandbox loads it itself.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
from dataclasses import dataclass

_LD_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_OFFSET_NR = 0
_OFFSET_ARCH = 4
_X32_BIT = 0x40000000

SPECIAL_MODE_BITS = 0o6000  # S_ISUID | S_ISGID
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AF_INET, AF_INET6 = 2, 10
SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET = 1, 2, 5
SOCK_TYPE_MASK = 0xF  # the rest of the type argument is SOCK_NONBLOCK | SOCK_CLOEXEC
IPPROTO_TCP = 6
MSG_FASTOPEN = 0x20000000
PIDFD_GETFD = 438  # the same number on both architectures


@dataclass(frozen=True)
class _Arch:
    """One architecture: its audit id, the denied calls, the calls whose argument ``i`` must not
    carry the mode bits, and ``clone``'s number."""

    audit: int
    deny: tuple[int, ...]
    nosys: tuple[int, ...]
    mode_arg: tuple[tuple[int, int], ...]
    clone: int
    socket: int
    socketpair: int
    listen: int
    send_flags: tuple[tuple[int, int], ...]  # sendto, sendmsg, sendmmsg: index of ``flags``


_ARCHES: dict[str, _Arch] = {
    "x86_64": _Arch(
        audit=0xC000003E,
        deny=(250, 248, 249, 101, 165, 166, 155, 246, 320, 321, 323, 298, 175, 313, 176,
              169, 167, 168, 304, 425, 426, 427, 428, 429, 430, 431, 432, 433, 442, 272,
              308, 163, 179, 310, 311, 103),
        nosys=(435, 437),
        mode_arg=((90, 1), (91, 1), (268, 2), (452, 2), (85, 1), (2, 2), (257, 3),
                  (133, 1), (259, 2)),
        clone=56,
        socket=41, socketpair=53, listen=50,
        send_flags=((44, 3), (46, 2), (307, 3)),
    ),
    "aarch64": _Arch(
        audit=0xC00000B7,
        deny=(219, 217, 218, 117, 40, 39, 41, 104, 294, 280, 282, 241, 105, 273, 106, 142,
              224, 225, 265, 425, 426, 427, 428, 429, 430, 431, 432, 433, 442, 97, 268, 89,
              60, 270, 271, 116),
        nosys=(435, 437),
        mode_arg=((52, 1), (53, 2), (452, 2), (56, 3), (33, 2)),
        clone=220,
        socket=198, socketpair=199, listen=201,
        send_flags=((206, 3), (211, 2), (269, 3)),
    ),
}


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def _arg_low(index: int) -> int:
    """Offset of the low 32 bits of argument ``index`` in ``struct seccomp_data``."""
    low_first = struct.pack("=I", 1)[0] == 1
    return 16 + 8 * index + (0 if low_first else 4)


def _masked_arg(nr: int, index: int, bits: int) -> bytes:
    """``nr`` with any of ``bits`` in argument ``index`` -> EPERM; ``nr`` otherwise -> allow."""
    return b"".join((
        _insn(_JEQ, nr, 0, 4),
        _insn(_LD_ABS, _arg_low(index)),
        _insn(_JSET, bits, 0, 1),
        _insn(_RET, _RET_ERRNO | errno.EPERM),
        _insn(_RET, _RET_ALLOW),
    ))


_DENY_SOCKET = _insn(_RET, _RET_ERRNO | errno.EACCES)


def _when(nr: int, block: tuple[bytes, ...]) -> bytes:
    """``block`` (which ends every path with a return) for system call ``nr``, skipped else."""
    return _insn(_JEQ, nr, 0, len(block)) + b"".join(block)


def _tcp_only_socket(nr: int) -> bytes:
    """``socket(domain, type, protocol)``: allowed only for a TCP socket; ``EACCES`` else.

    The three arguments are ``int``: the kernel reads their low 32 bits only, as this does."""
    return _when(nr, (
        _insn(_LD_ABS, _arg_low(0)),
        _insn(_JEQ, AF_INET, 1, 0),
        _insn(_JEQ, AF_INET6, 0, 6),
        _insn(_LD_ABS, _arg_low(1)),
        _insn(_AND, SOCK_TYPE_MASK),
        _insn(_JEQ, SOCK_STREAM, 0, 3),
        _insn(_LD_ABS, _arg_low(2)),
        _insn(_JEQ, 0, 2, 0),
        _insn(_JEQ, IPPROTO_TCP, 1, 0),
        _DENY_SOCKET,
        _insn(_RET, _RET_ALLOW),
    ))


def _connected_pairs_only(nr: int) -> bytes:
    """``socketpair``: a stream or seqpacket pair only (their sockets stay connected to each
    other); a datagram pair could send to any pathname socket."""
    return _when(nr, (
        _insn(_LD_ABS, _arg_low(1)),
        _insn(_AND, SOCK_TYPE_MASK),
        _insn(_JEQ, SOCK_STREAM, 1, 0),
        _insn(_JEQ, SOCK_SEQPACKET, 0, 1),
        _insn(_RET, _RET_ALLOW),
        _DENY_SOCKET,
    ))


def _offline(arch: _Arch) -> list[bytes]:
    """The socket rules of the offline variant (see the module's docstring)."""
    parts = [_tcp_only_socket(arch.socket), _connected_pairs_only(arch.socketpair),
             _insn(_JEQ, arch.listen, 0, 1), _DENY_SOCKET,
             _insn(_JEQ, PIDFD_GETFD, 0, 1), _DENY_SOCKET]
    for nr, index in arch.send_flags:
        parts.append(_when(nr, (
            _insn(_LD_ABS, _arg_low(index)),
            _insn(_JSET, MSG_FASTOPEN, 0, 1),
            _DENY_SOCKET,
            _insn(_RET, _RET_ALLOW),
        )))
    return parts


def build_program(machine: str, *, offline: bool = False) -> bytes:
    """The filter for ``machine`` (``platform.machine()`` spelling) as ``sock_filter`` records;
    ``offline``: with the socket rules of the Landlock sandbox (see the module's docstring)."""
    arch = _ARCHES.get(machine)
    if arch is None:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    parts = [
        _insn(_LD_ABS, _OFFSET_ARCH),
        _insn(_JEQ, arch.audit, 1, 0),
        _insn(_RET, _RET_KILL_PROCESS),
        _insn(_LD_ABS, _OFFSET_NR),
    ]
    if machine == "x86_64":
        parts += [_insn(_JGE, _X32_BIT, 0, 1), _insn(_RET, _RET_KILL_PROCESS)]
    for nr in arch.deny:
        parts += [_insn(_JEQ, nr, 0, 1), _insn(_RET, _RET_ERRNO | errno.EPERM)]
    for nr in arch.nosys:
        parts += [_insn(_JEQ, nr, 0, 1), _insn(_RET, _RET_ERRNO | errno.ENOSYS)]
    for nr, index in arch.mode_arg:
        parts.append(_masked_arg(nr, index, SPECIAL_MODE_BITS))
    parts.append(_masked_arg(arch.clone, 0, NAMESPACE_FLAGS))
    if offline:
        parts += _offline(arch)
    parts.append(_insn(_RET, _RET_ALLOW))
    return b"".join(parts)


@functools.cache
def host_program(*, offline: bool = False) -> bytes:
    """The filter for this host (each variant built once per process)."""
    return build_program(platform.machine(), offline=offline)


def program_fd() -> int:
    """A fresh file descriptor at offset 0 holding :func:`host_program` (the caller closes it)."""
    fd = os.memfd_create("studio-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, host_program())
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
