"""Issue 19: every command runs under resource limits, in every sandbox mode.

The limits here are small on purpose, and each hostile command is bounded by itself too (at most
200 processes, 1 GiB of memory, 100 MiB of disk), so a limit that did not hold would fail the test
without harming the machine. Before issue 19 there was no limit: each test below failed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.sandbox.cgroup import cgroup_layout, sweep_stale_groups
from services.execution.sandbox.limits import CommandLimits, MiB
from services.execution.tool_domains.context import ToolDomainContext
from tests.conftest import IN_CI
from tests.unit.execution.command_helpers import (
    command_context,
    gone,
    require_sandbox,
    run_command,
    sandbox_context,
    sleep_marker,
    watching_pids,
)

pytestmark = pytest.mark.sandbox

SMALL = CommandLimits(memory_bytes=256 * MiB, processes=48, open_files=64,
                      file_size_bytes=16 * MiB, cpu_seconds=2, tmp_bytes=32 * MiB)
MODES = ["bwrap", "bwrap-session", "landlock", "none"]



@pytest.fixture(params=MODES)
def ctx(request: pytest.FixtureRequest, workspace: Path) -> Iterator[ToolDomainContext]:
    with sandbox_context(workspace, str(request.param), SMALL) as found:
        yield found


def _run(ctx: ToolDomainContext, timeout_s: float = 120, **args: Any) -> dict[str, Any]:
    envelope = run_command(ctx, timeout_s=timeout_s, **args)
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    return result


def test_this_host_gives_commands_a_cgroup() -> None:
    """Where the harness runs as root on cgroup v1 or v2 (CI), the limits hold per process tree."""
    if os.geteuid() != 0 and not IN_CI:
        pytest.skip("a non-root harness gets rlimits only")
    layout = cgroup_layout()
    assert layout is not None and layout.memory is not None and layout.pids is not None


HOG = "import sys; data = b'x' * (1024 ** 3); print('ALLOCATED', len(data))"


def test_a_memory_hog_is_stopped(ctx: ToolDomainContext) -> None:
    result = _run(ctx, argv=["python3", "-c", HOG])
    assert "ALLOCATED" not in result["stdout"], result
    assert result["exit_code"] != 0 or result["signal"] is not None
    assert _run(ctx, command="echo still-fine")["stdout"] == "still-fine\n"


FORKS = """
import errno, os, sys, time
started = 0
refused = None
for _ in range(200):
    try:
        pid = os.fork()
    except OSError as exc:
        refused = errno.errorcode.get(exc.errno, str(exc.errno))
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started += 1
print('STARTED', started, 'REFUSED', refused, flush=True)
# the sleepers stay until the harness has seen them (sys.argv[2] appears), at most 30 s
deadline = time.monotonic() + 30
while not os.path.exists(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.02)
"""


def test_a_fork_bomb_is_contained(ctx: ToolDomainContext, workspace: Path) -> None:
    """The fork loop is refused (``EAGAIN``: the pids limit) before ``SMALL.processes``, its
    sleepers were really running meanwhile, and every one of them died with the command.
    The command waits (30 s at most) until the watcher has seen its sleepers: under load, the
    fork loop can end, and the sandbox kill the sleepers, between two scans of ``/proc``."""
    marker = f"fork-bomb-{sleep_marker()}"  # in each fork's command line (argv is inherited)
    seen_flag = workspace / "sleepers-seen"  # the command's working directory
    with watching_pids(marker, seen_flag) as seen:
        result = _run(ctx, timeout_s=60, argv=["python3", "-c", FORKS, marker, seen_flag.name])
    words = result["stdout"].split()
    assert words[:2] == ["STARTED", words[1]] and words[2:] == ["REFUSED", "EAGAIN"], result
    started = int(words[1])
    assert 0 < started < SMALL.processes, result
    assert len(seen) > 1, seen  # the watcher saw the sleepers, not only the parent
    assert gone(marker), "a forked sleeper outlived the command"
    assert _run(ctx, command="echo still-fine")["stdout"] == "still-fine\n"


def test_open_files_are_limited(ctx: ToolDomainContext) -> None:
    script = ("import os\nfds = []\ntry:\n    for _ in range(500): fds.append(os.open('/dev/null',"
              " os.O_RDONLY))\nexcept OSError: pass\nprint('OPEN', len(fds))")
    result = _run(ctx, argv=["python3", "-c", script])
    assert int(result["stdout"].split()[1]) < SMALL.open_files, result


def test_file_size_is_limited(ctx: ToolDomainContext, workspace: Path) -> None:
    (workspace / "out").mkdir()  # Landlock: new top-level entries are made by the tools
    _run(ctx, command="head -c 104857600 /dev/zero > out/big.bin")
    assert (workspace / "out" / "big.bin").stat().st_size <= SMALL.file_size_bytes


def test_cpu_time_is_limited(ctx: ToolDomainContext) -> None:
    result = _run(ctx, timeout_s=300, argv=["python3", "-c", "while True: pass"])
    assert result["timed_out"] is False, result
    assert result["signal"] in ("SIGXCPU", "SIGKILL") or result["exit_code"] != 0, result


def test_the_private_tmp_is_sized(workspace: Path) -> None:
    ctx = command_context(workspace, require_sandbox("bwrap", SMALL))
    for place in ("/tmp", "/var/tmp"):
        result = _run(ctx, command=f"df -B1 --output=size {place} | tail -1")
        assert int(result["stdout"].strip()) <= SMALL.tmp_bytes, result


def test_stale_empty_groups_are_swept() -> None:
    """A harness killed mid-command leaves its (empty) group behind; the next one removes it."""
    layout = cgroup_layout()
    if layout is None or layout.pids is None:
        if IN_CI:
            pytest.fail("no cgroup here")
        pytest.skip("no cgroup here")
    parent = layout.pids / f"studio-test-sweep-{os.getpid()}"  # apart from live groups
    parent.mkdir()
    groups = [parent / "studio-cmd-old", parent / "studio-cmd-busy"]
    try:
        for group in groups:
            group.mkdir()
        holder = subprocess.Popen(["sleep", "60"])
        try:
            (groups[1] / "cgroup.procs").write_text(str(holder.pid))
            assert sweep_stale_groups(parent) == 0  # too young: maybe about to be joined
            assert sweep_stale_groups(parent, older_than_s=0) == 1
            assert not groups[0].exists() and groups[1].exists()  # a live command's stays
        finally:
            holder.kill()
            holder.wait()
    finally:
        for group in groups:
            if group.exists():
                group.rmdir()
        parent.rmdir()
