"""The hand-built seccomp program, run through a small classic-BPF interpreter for both
architectures (the kernel runs the same instructions; aarch64 cannot be executed here)."""

from __future__ import annotations

import errno
import struct

import pytest

from services.execution.sandbox.seccomp import build_program

ALLOW = 0x7FFF0000
KILL = 0x80000000
AUDIT = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}


def _verdict(program: bytes, nr: int, args: tuple[int, ...] = (), arch: int = 0) -> int:
    """Run ``program`` on one ``struct seccomp_data`` (classic BPF: LD ABS, AND, JEQ/JGE/JSET,
    RET)."""
    padded = (*args, *([0] * (6 - len(args))))
    data = struct.pack("=iIQ6Q", nr, arch, 0, *padded)
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x54:  # ALU AND K
            acc &= k
            pc += 1
        elif code == 0x06:
            return int(k)
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)


DENIED = {  # keyctl, ptrace, mount, bpf, perf_event_open, userfaultfd, kexec_load, unshare
    "x86_64": (250, 101, 165, 321, 298, 323, 246, 272),
    "aarch64": (219, 117, 40, 280, 241, 282, 104, 97),
}
MODE_CALLS = {  # chmod/fchmod, fchmodat, openat: (number, index of the mode argument)
    "x86_64": ((90, 1), (268, 2), (257, 3)),
    "aarch64": ((52, 1), (53, 2), (56, 3)),
}
READ = {"x86_64": 0, "aarch64": 63}
CLONE = {"x86_64": 56, "aarch64": 220}
EPERM = 0x00050000 | errno.EPERM
THREAD_FLAGS = 0x3D0F00  # what pthread_create passes to clone
CLONE_NEWUSER = 0x10000000


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_for(machine: str) -> None:
    program = build_program(machine)
    arch = AUDIT[machine]
    for nr in DENIED[machine]:
        assert _verdict(program, nr, arch=arch) == EPERM, nr
    assert _verdict(program, 435, arch=arch) == 0x00050000 | errno.ENOSYS  # clone3
    assert _verdict(program, READ[machine], arch=arch) == ALLOW
    for nr, index in MODE_CALLS[machine]:
        for mode, verdict in ((0o4755, EPERM), (0o2755, EPERM), (0o755, ALLOW)):
            args = tuple(mode if i == index else 0 for i in range(6))
            assert _verdict(program, nr, args, arch) == verdict, (nr, oct(mode))
    assert _verdict(program, CLONE[machine], (THREAD_FLAGS,), arch) == ALLOW
    assert _verdict(program, CLONE[machine], (CLONE_NEWUSER | 17,), arch) == EPERM
    other = AUDIT["aarch64" if machine == "x86_64" else "x86_64"]
    assert _verdict(program, READ[machine], arch=other) == KILL
    x32 = KILL if machine == "x86_64" else ALLOW
    assert _verdict(program, 0x40000000, arch=arch) == x32


def test_an_unknown_architecture_is_refused() -> None:
    with pytest.raises(ValueError):
        build_program("riscv64")


SOCKET_CALLS = {  # socket, socketpair, listen, sendto (flags at 3), sendmsg (2), sendmmsg (3)
    "x86_64": (41, 53, 50, ((44, 3), (46, 2), (307, 3))),
    "aarch64": (198, 199, 201, ((206, 3), (211, 2), (269, 3))),
}
EACCES = 0x00050000 | errno.EACCES
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40
STREAM, DGRAM, RAW, SEQPACKET = 1, 2, 3, 5
NONBLOCK_CLOEXEC = 0o4000 | 0o2000000


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_offline_filter_allows_tcp_sockets_and_connected_pairs_only(machine: str) -> None:
    arch = AUDIT[machine]
    socket_nr, pair_nr, listen_nr, sends = SOCKET_CALLS[machine]
    offline, plain = build_program(machine, offline=True), build_program(machine)
    allowed = [(AF_INET, STREAM, 0), (AF_INET6, STREAM | NONBLOCK_CLOEXEC, 6)]
    refused = [(AF_UNIX, STREAM, 0), (AF_UNIX, DGRAM | NONBLOCK_CLOEXEC, 0),
               (AF_INET, DGRAM, 0), (AF_INET6, DGRAM, 17), (AF_INET, STREAM, 262),  # MPTCP
               (AF_INET, RAW, 1), (AF_INET, SEQPACKET, 132), (AF_NETLINK, RAW, 0),
               (AF_PACKET, RAW, 0), (AF_VSOCK, STREAM, 0), (AF_UNIX | 1 << 32, STREAM, 0)]
    for args in allowed:
        assert _verdict(offline, socket_nr, args, arch) == ALLOW, args
    for args in refused:
        assert _verdict(offline, socket_nr, args, arch) == EACCES, args
        assert _verdict(plain, socket_nr, args, arch) == ALLOW, args  # bubblewrap's stays
    for kind, verdict in ((STREAM, ALLOW), (SEQPACKET | NONBLOCK_CLOEXEC, ALLOW),
                          (DGRAM, EACCES), (DGRAM | NONBLOCK_CLOEXEC, EACCES)):
        assert _verdict(offline, pair_nr, (AF_UNIX, kind, 0), arch) == verdict, kind
    assert _verdict(offline, listen_nr, (3, 8), arch) == EACCES
    assert _verdict(offline, 438, (3, 4, 0), arch) == EACCES  # pidfd_getfd
    assert _verdict(plain, listen_nr, (3, 8), arch) == ALLOW
    for nr, index in sends:
        fastopen = tuple(0x20000000 if i == index else 0 for i in range(6))
        assert _verdict(offline, nr, fastopen, arch) == EACCES, nr
        assert _verdict(offline, nr, (3, 0, 0, 0x40, 0, 0), arch) == ALLOW, nr
    # the rest of the filter is unchanged
    assert _verdict(offline, DENIED[machine][0], arch=arch) == EPERM
    assert _verdict(offline, READ[machine], arch=arch) == ALLOW
