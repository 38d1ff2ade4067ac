"""Issue 19: what a hostile command tried against the sandboxes, and what stops it now.

Each test here failed on the code before the hardening: the command opened a sysctl for writing,
left a set-user-ID file behind, ran as uid 0, or called a kernel interface it never needs.
Run as root (as CI does): that is where the findings mattered.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.tool_domains.context import ToolDomainContext
from tests.unit.execution.command_helpers import (
    run_command,
    sandbox_context,
)

pytestmark = pytest.mark.sandbox



@pytest.fixture(params=["bwrap", "bwrap-session"])
def bwrap_ctx(request: pytest.FixtureRequest, workspace: Path) -> Iterator[ToolDomainContext]:
    """A command per ``bwrap``, and the execution's long-lived one (issue 12)."""
    with sandbox_context(workspace, str(request.param)) as ctx:
        yield ctx


def _run(ctx: ToolDomainContext, script: str) -> dict[str, Any]:
    envelope = run_command(ctx, command=script)
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    return result


@pytest.mark.parametrize("sysctl", ["kernel/core_pattern", "vm/drop_caches"])
def test_host_sysctls_cannot_be_opened_for_writing(
    bwrap_ctx: ToolDomainContext, sysctl: str
) -> None:
    before = Path("/proc/sys", sysctl).read_bytes() if sysctl.startswith("kernel") else b""
    # ``: >>`` opens for appending and writes nothing: harmless even where it succeeds.
    result = _run(bwrap_ctx, f": >> /proc/sys/{sysctl} && echo OPENED")
    assert "OPENED" not in result["stdout"], result
    assert result["exit_code"] != 0
    if before:
        assert Path("/proc/sys", sysctl).read_bytes() == before


def test_the_command_runs_as_an_unprivileged_id(bwrap_ctx: ToolDomainContext) -> None:
    result = _run(bwrap_ctx, "id -u; id -g; id -G")
    ids = result["stdout"].split()
    assert ids and "0" not in ids, result


def test_files_made_inside_belong_to_the_harness(
    bwrap_ctx: ToolDomainContext, workspace: Path
) -> None:
    (workspace / "existing.txt").write_text("old\n")
    result = _run(bwrap_ctx, "echo new >> existing.txt && mkdir made && echo x > made/f")
    assert result["exit_code"] == 0, result
    assert (workspace / "existing.txt").read_text() == "old\nnew\n"
    assert (workspace / "made" / "f").stat().st_uid == os.getuid()


EPERM_TEXT = os.strerror(errno.EPERM)  # "Operation not permitted"
# Each attempt, and whether its file ``t`` must exist afterwards: made by ``cp`` (or ``install``)
# before the refused mode change, or never made (an ``open`` whose mode asks for set-id bits is
# refused as a whole).
SETUID_ATTEMPTS = [
    ("cp /bin/true t && chmod 4755 t", True),
    ("cp /bin/true t && chmod g+s t", True),
    ("cp /bin/true t && chmod u+s t", True),
    ("install -m 4755 /bin/true t", True),
    ("python3 -c \"import os; os.close(os.open('t', os.O_CREAT | os.O_WRONLY, 0o6755))\"", False),
    ("cp /bin/true t && python3 -c \"import os; os.chmod('t', 0o4755)\"", True),
    ("cp /bin/true t && python3 -c \"import os; fd = os.open('t', os.O_RDONLY); "
     "os.fchmod(fd, 0o2755)\"", True),
]


@pytest.mark.parametrize(("script", "made"), SETUID_ATTEMPTS)
def test_no_set_id_file_is_left_in_the_workspace(
    bwrap_ctx: ToolDomainContext, workspace: Path, script: str, made: bool
) -> None:
    """Every way of asking for a set-id bit is refused (``EPERM``): the file is there without
    the bit where it was made first, and absent where the making itself was refused."""
    result = _run(bwrap_ctx, script)
    assert result["exit_code"] != 0 and EPERM_TEXT in result["stderr"], result
    target = workspace / "t"
    assert target.exists() is made, result
    if made:
        mode = target.stat().st_mode
        assert not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)


KEYCTL = (
    "python3 -c \"import ctypes, sys; r = ctypes.CDLL(None, use_errno=True)"
    ".syscall(250 if __import__('platform').machine() == 'x86_64' else 219, 0, -3, 0, 0); "
    "print('errno', ctypes.get_errno() if r < 0 else 0); sys.exit(0 if r >= 0 else 1)\""
)  # keyctl(KEYCTL_GET_KEYRING_ID, session)


@pytest.mark.parametrize(
    ("script", "stream", "reason"),
    [
        ("unshare -U true", "stderr", f"unshare failed: {EPERM_TEXT}"),
        ("unshare -r true", "stderr", f"unshare failed: {EPERM_TEXT}"),
        (KEYCTL, "stdout", f"errno {errno.EPERM}"),
    ],
)
def test_dangerous_kernel_interfaces_are_refused(
    bwrap_ctx: ToolDomainContext, script: str, stream: str, reason: str
) -> None:
    """Refused with ``EPERM`` (the seccomp filter's answer), not merely failing for another
    reason such as a missing binary."""
    result = _run(bwrap_ctx, script)
    assert result["exit_code"] != 0, result
    assert reason in result[stream], result


SYSCALL_PROBE = """
import ctypes, platform, sys
numbers = {"x86_64": {"ptrace": 101, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323,
                      "kexec_load": 246, "mount": 165, "keyctl": 250},
           "aarch64": {"ptrace": 117, "bpf": 280, "perf_event_open": 241, "userfaultfd": 282,
                       "kexec_load": 104, "mount": 40, "keyctl": 219}}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
for name, nr in numbers.items():
    result = libc.syscall(nr, 0, 0, 0, 0, 0)
    print(name, result, ctypes.get_errno())
"""


@pytest.mark.parametrize("mode", ["bwrap", "bwrap-session", "landlock"])
def test_the_seccomp_filter_answers_eperm(workspace: Path, mode: str) -> None:
    with sandbox_context(workspace, mode) as ctx:
        envelope = run_command(ctx, argv=["python3", "-c", SYSCALL_PROBE])
    assert envelope["ok"] is True, envelope
    lines = envelope["result"]["stdout"].splitlines()
    assert len(lines) == 7, envelope
    for line in lines:
        name, result, err = line.split()
        assert (result, int(err)) == ("-1", errno.EPERM), line


def test_ordinary_work_still_runs(bwrap_ctx: ToolDomainContext, workspace: Path) -> None:
    """The filter refuses only what it names: threads, subprocesses and chmod +x still work."""
    script = (
        "git init -q . && printf '#!/bin/sh\\necho ran\\n' > s.sh && chmod 755 s.sh && ./s.sh && "
        "python3 -c \"import concurrent.futures as f, subprocess; "
        "print(list(f.ThreadPoolExecutor(4).map(abs, [-1, -2]))); subprocess.run(['true'])\""
    )
    result = _run(bwrap_ctx, script)
    assert result["exit_code"] == 0, result
    assert "ran" in result["stdout"] and "[1, 2]" in result["stdout"]
