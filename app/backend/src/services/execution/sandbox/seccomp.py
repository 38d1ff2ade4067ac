"""The seccomp filter every sandboxed command runs under, as classic BPF built by hand.

The program is a short list of system calls that a build or a test never needs and that a hostile
command would use to reach past its sandbox: key rings, ``ptrace``, mounts and the new mount API,
module loading, ``kexec``, ``bpf``, ``userfaultfd``, ``perf_event_open``, ``io_uring`` (whose
requests no filter can see), new namespaces (``unshare``, ``setns``, ``clone`` with a namespace
flag), and every way of giving a file the set-user-ID or set-group-ID bit (``chmod`` family, and a
create with such a mode through ``open``/``openat``/``creat``/``mknod``). They fail with ``EPERM``.
``clone3`` and ``openat2`` take their flags in a structure a filter cannot read: they fail with
``ENOSYS``, and the C library falls back to ``clone`` and ``openat``, which are checked.

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
_RET = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_OFFSET_NR = 0
_OFFSET_ARCH = 4
_X32_BIT = 0x40000000

SPECIAL_MODE_BITS = 0o6000  # S_ISUID | S_ISGID
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET


@dataclass(frozen=True)
class _Arch:
    """One architecture: its audit id, the denied calls, the calls whose argument ``i`` must not
    carry the mode bits, and ``clone``'s number."""

    audit: int
    deny: tuple[int, ...]
    nosys: tuple[int, ...]
    mode_arg: tuple[tuple[int, int], ...]
    clone: int


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
    ),
    "aarch64": _Arch(
        audit=0xC00000B7,
        deny=(219, 217, 218, 117, 40, 39, 41, 104, 294, 280, 282, 241, 105, 273, 106, 142,
              224, 225, 265, 425, 426, 427, 428, 429, 430, 431, 432, 433, 442, 97, 268, 89,
              60, 270, 271, 116),
        nosys=(435, 437),
        mode_arg=((52, 1), (53, 2), (452, 2), (56, 3), (33, 2)),
        clone=220,
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


def build_program(machine: str) -> bytes:
    """The filter for ``machine`` (``platform.machine()`` spelling) as ``sock_filter`` records."""
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
    parts.append(_insn(_RET, _RET_ALLOW))
    return b"".join(parts)


@functools.cache
def host_program() -> bytes:
    """The filter for this host, built once per process."""
    return build_program(platform.machine())


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
