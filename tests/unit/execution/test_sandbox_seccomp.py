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
    """Run ``program`` on one ``struct seccomp_data`` (classic BPF: LD ABS, JEQ/JGE/JSET, RET)."""
    padded = (*args, *([0] * (6 - len(args))))
    data = struct.pack("=iIQ6Q", nr, arch, 0, *padded)
    insns = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = insns[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
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
