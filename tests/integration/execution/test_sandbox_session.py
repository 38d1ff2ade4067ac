"""Issue 12: one sandbox for the life of an execution, with a supervisor as its PID 1.

What must not change with one ``bwrap`` per execution instead of one per command: nothing a
command starts outlives it, every command gets its own scrubbed environment and empty scratch
directories, and the supervisor's control channel is out of the commands' reach. What is new:
the sandbox is started again when it dies (and the execution's journal says so), and it ends
with the execution, the harness's death included.

The per-mode cases run in both modes ``auto`` may pick: bubblewrap (the long-lived sandbox) and
Landlock (a domain per command, whose cgroup ends every process a command leaves).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.ports import AgentEvent, AgentEventKind
from services.execution.sandbox.session import BwrapSession, wait_gone
from services.execution.tool_domains.context import ToolDomainContext
from services.runs.loop import LastCycle, execution_sandbox
from tests.unit.execution.command_helpers import (
    command_context,
    gone,
    marker_pids,
    require_sandbox,
    run_command,
    sandbox_context,
    sleep_marker,
)

pytestmark = pytest.mark.sandbox

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(params=["bwrap-session", "landlock"])
def ctx(request: pytest.FixtureRequest, workspace: Path) -> Iterator[ToolDomainContext]:
    with sandbox_context(workspace, str(request.param)) as found:
        yield found


@pytest.fixture
def notices() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def session_ctx(workspace: Path,
                notices: list[tuple[str, str]]) -> Iterator[ToolDomainContext]:
    with sandbox_context(workspace, "bwrap-session",
                         notify=lambda code, text: notices.append((code, text))) as found:
        yield found


def _run(ctx: ToolDomainContext, **args: Any) -> dict[str, Any]:
    envelope = run_command(ctx, **args)
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    return result


def _session(ctx: ToolDomainContext) -> BwrapSession:
    assert isinstance(ctx.sandbox, BwrapSession)
    return ctx.sandbox


# -- what each command still gets on its own --------------------------------------------------
def test_a_background_process_is_gone_before_the_next_command(ctx: ToolDomainContext) -> None:
    marker = sleep_marker()
    first = _run(ctx, command=f"sleep {marker} > /dev/null 2>&1 & echo started $!")
    assert first["exit_code"] == 0 and first["stdout"].startswith("started"), first
    assert not marker_pids(marker), "the background sleep outlived its command"
    second = _run(ctx, command=f"ps -eo args | grep -c '^sleep {marker}' || true")
    assert second["stdout"].strip() == "0", second
    assert gone(marker)


def test_a_detached_daemon_is_gone_too(ctx: ToolDomainContext) -> None:
    marker = sleep_marker()
    _run(ctx, command=f"setsid sh -c 'sleep {marker}' > /dev/null 2>&1 < /dev/null &")
    assert not marker_pids(marker)


def test_the_environment_is_built_per_command(
    ctx: ToolDomainContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDIO_TEST_HARNESS_SECRET", "harness-secret-value")
    first = _run(ctx, command="echo ${ONLY_FIRST-unset}; export LEAK=1; env",
                 env={"ONLY_FIRST": "one"})
    assert first["stdout"].splitlines()[0] == "one"
    second = _run(ctx, command="echo ${ONLY_FIRST-unset} ${LEAK-unset}; env")
    assert second["stdout"].splitlines()[0] == "unset unset", second
    for result in (first, second):
        assert "harness-secret-value" not in result["stdout"]
        assert "STUDIO_" not in result["stdout"]


def test_large_arguments_and_environments_still_run(ctx: ToolDomainContext) -> None:
    """Over a megabyte of request: more than a socket packet may carry (the first version of the
    supervisor's channel refused it)."""
    env = {f"LARGE_{i}": "y" * 30_000 for i in range(40)}
    result = _run(ctx, command=f"echo {'x' * 120_000} | wc -c; env | grep -c '^LARGE_'", env=env)
    assert result["stdout"].split() == ["120001", "40"], result


def test_scratch_directories_start_empty(ctx: ToolDomainContext) -> None:
    _run(ctx, command='echo x > "$TMPDIR/left-tmp" && echo y > "$HOME/left-home"')
    second = _run(ctx, command='ls -A "$TMPDIR" "$HOME"')
    assert "left-tmp" not in second["stdout"] and "left-home" not in second["stdout"], second


HOSTILE_SCRATCH = (
    "mkdir -p /tmp/a/b/c /var/tmp/d /tmp/home/e && touch /tmp/a/b/c/f /dev/shm/g && "
    "mkfifo /tmp/fifo && ln -s / /tmp/root-link && chmod 000 /tmp/a/b/c /tmp/a/b /tmp/a && "
    "chmod 000 /tmp/home/e /var/tmp/d && chmod 000 /tmp/home; chmod 000 /tmp; echo planted"
)


def test_hostile_scratch_leftovers_are_cleared(session_ctx: ToolDomainContext,
                                               notices: list[tuple[str, str]]) -> None:
    assert _run(session_ctx, command=HOSTILE_SCRATCH)["stdout"] == "planted\n"
    after = _run(session_ctx, command="ls -A /tmp /var/tmp /dev/shm /tmp/home; touch $HOME/ok "
                                       "$TMPDIR/ok /var/tmp/ok /dev/shm/ok")
    assert after["exit_code"] == 0, after
    listed = after["stdout"].split()
    assert not {"a", "d", "e", "f", "g", "fifo", "root-link"} & set(listed), after
    assert _session(session_ctx).starts == 1 and notices == []


@pytest.mark.parametrize("name", ["wörk space", "back\\slash", "new\nline"])
def test_a_workspace_beneath_tmp_survives_the_scratch_reset(tmp_path: Path, name: str) -> None:
    """The workspace is bound beneath the sandbox's /tmp when it lives under the host's: the
    supervisor must keep it, whatever its name, while it empties /tmp after each command."""
    workspace = tmp_path / name
    workspace.mkdir()
    (workspace / "keep.txt").write_text("kept")
    with sandbox_context(workspace, "bwrap-session") as ctx:
        assert _run(ctx, command="echo more > more.txt")["exit_code"] == 0
        assert _run(ctx, command="cat keep.txt more.txt")["stdout"] == "keptmore\n"
        assert _session(ctx).starts == 1
    assert (workspace / "keep.txt").read_text() == "kept"
    assert (workspace / "more.txt").read_text() == "more\n"


def test_exit_codes_signals_and_timeouts(ctx: ToolDomainContext) -> None:
    assert _run(ctx, command="exit 7")["exit_code"] == 7
    killed = _run(ctx, command="kill -TERM $$")
    assert (killed["exit_code"], killed["signal"]) == (-signal.SIGTERM, "SIGTERM"), killed
    missing = _run(ctx, argv=["no-such-program-anywhere"])
    assert missing["exit_code"] == 127, missing
    marker = sleep_marker()
    late = _run(ctx, command=f"echo before; sleep {marker}", timeout_s=0.5)
    assert late["timed_out"] is True and late["stdout"] == "before\n", late
    assert gone(marker)
    assert _run(ctx, command="echo after")["stdout"] == "after\n"


def test_a_program_that_cannot_run_answers_as_a_shell(session_ctx: ToolDomainContext) -> None:
    """The supervisor starts commands itself (no ``subprocess``, issue 39): a program it
    cannot execute still ends with 127 (not found) or 126 (not executable) and says why on its
    stderr; the sandbox carries on."""
    missing = _run(session_ctx, argv=["no-such-program-anywhere"])
    assert (missing["exit_code"], missing["stderr"]) == (
        127, "cannot execute: No such file or directory\n"), missing
    _run(session_ctx, command="printf 'echo hi' > plain.sh")
    plain = _run(session_ctx, argv=["./plain.sh"])
    assert (plain["exit_code"], plain["stderr"]) == (
        126, "cannot execute: Permission denied\n"), plain
    # looked up in the command's own PATH, as Popen did: past a directory whose program cannot
    # be executed to one that can; with none, the first error other than "not found"
    _run(session_ctx, command="mkdir a b && printf '#!/bin/sh\\necho from-b\\n' > b/prog "
                              "&& chmod +x b/prog && cp b/prog a/prog && chmod -x a/prog")
    found = _run(session_ctx, argv=["prog"], env={"PATH": "missing:a:b"})
    assert (found["exit_code"], found["stdout"]) == (0, "from-b\n"), found
    refused = _run(session_ctx, argv=["prog"], env={"PATH": "missing:a"})
    assert (refused["exit_code"], refused["stderr"]) == (
        126, "cannot execute: Permission denied\n"), refused
    assert _session(session_ctx).starts == 1


# -- one sandbox for the execution -------------------------------------------------------------
def test_commands_share_one_sandbox(session_ctx: ToolDomainContext) -> None:
    session = _session(session_ctx)
    for _ in range(5):
        assert _run(session_ctx, command="echo $$")["exit_code"] == 0
    assert session.starts == 1
    pid1 = _run(session_ctx, command="cat /proc/1/comm; ls /proc | grep -c '^[0-9]'")
    lines = pid1["stdout"].split()
    assert lines[0].startswith("python"), pid1  # the supervisor is PID 1
    assert int(lines[1]) <= 4, pid1  # PID 1, the shell, ls and grep: nothing else


CHANNEL_PROBE = textwrap.dedent("""
    import ctypes, os, socket
    mine = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
    sockets = [fd for fd in mine if os.path.exists(f"/proc/self/fd/{fd}")
               and os.readlink(f"/proc/self/fd/{fd}").startswith("socket:")]
    print("own-sockets", sockets)
    opened = []
    for fd in os.listdir("/proc/1/fd"):  # the numbers may be listed; none may be opened
        try:
            os.close(os.open(f"/proc/1/fd/{fd}", os.O_RDWR))
            opened.append(fd)
        except OSError:
            pass
    print("pid1-opened", opened)
    try:
        with open("/proc/1/mem", "rb") as mem:
            print("pid1-mem", "readable")
    except OSError as exc:
        print("pid1-mem", type(exc).__name__)
    try:
        print("pid1-environ", repr(open("/proc/1/environ").read()))
    except OSError as exc:
        print("pid1-environ", type(exc).__name__)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(1)
    taken = []
    for fd in range(64):
        got = libc.syscall(438, pidfd, fd, 0)  # pidfd_getfd
        if got >= 0:
            taken.append(fd)
    print("taken", taken, ctypes.get_errno())
    others = [p for p in os.listdir("/proc") if p.isdigit() and p not in ("1", str(os.getpid()))]
    seen = []
    for p in others:
        try:
            seen += os.listdir(f"/proc/{p}/fd")
        except OSError:
            pass
    print("other-fds", seen)
""")


def test_the_control_channel_is_out_of_reach(session_ctx: ToolDomainContext) -> None:
    result = _run(session_ctx, argv=["python3", "-c", CHANNEL_PROBE])
    lines = dict(line.split(" ", 1) for line in result["stdout"].splitlines())
    assert lines["own-sockets"] == "[]", result
    assert lines["pid1-opened"] == "[]", result
    assert lines["pid1-mem"] == "PermissionError", result
    assert lines["pid1-environ"] == "PermissionError", result
    assert lines["taken"].startswith("[] "), result
    assert lines["other-fds"] == "[]", result
    # Nothing in the sandbox's file system names a socket either.
    found = _run(session_ctx, command="find / -xdev -type s 2>/dev/null | head -5")
    assert found["stdout"] == "", found


def test_a_command_cannot_read_another_commands_output(session_ctx: ToolDomainContext) -> None:
    """A reader left behind by one command would be the only way: it does not survive."""
    _run(session_ctx, command="(while :; do cat /proc/*/fd/1 2>/dev/null; sleep 0.01; done) "
                              "> /tmp/stolen 2>&1 &")
    second = _run(session_ctx, command="echo private-output-of-the-second")
    assert second["stdout"] == "private-output-of-the-second\n"
    third = _run(session_ctx, command="cat /tmp/stolen 2>&1; echo end")
    assert "private-output" not in third["stdout"], third


def test_killing_pid_1_from_inside_only_ends_that_sandbox(
    session_ctx: ToolDomainContext, notices: list[tuple[str, str]]
) -> None:
    session = _session(session_ctx)
    _run(session_ctx, command="true")
    first = session.pid()
    attempt = _run(session_ctx, command="kill -KILL 1; kill -TERM 1; kill -INT 1; "
                                        "kill -KILL -1; echo survived")
    # Signals from inside never reach the namespace's init: the command goes on.
    assert attempt["stdout"] == "survived\n", attempt
    after = _run(session_ctx, command="echo next")
    assert after["stdout"] == "next\n"
    assert session.pid() == first and session.starts == 1
    assert notices == []


def test_a_dead_sandbox_is_started_again_and_said_so(
    session_ctx: ToolDomainContext, notices: list[tuple[str, str]]
) -> None:
    session = _session(session_ctx)
    _run(session_ctx, command="true")
    first = session.pid()
    assert first is not None
    os.killpg(first, signal.SIGKILL)
    assert wait_gone(first)
    result = _run(session_ctx, command="echo again")
    assert result["stdout"] == "again\n", result
    assert session.starts == 2 and session.pid() != first
    assert [code for code, _ in notices] == ["sandbox_restarted"]


def test_a_sandbox_killed_during_a_command_ends_that_command(
    session_ctx: ToolDomainContext, notices: list[tuple[str, str]]
) -> None:
    session = _session(session_ctx)
    _run(session_ctx, command="true")
    pid = session.pid()
    assert pid is not None
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.5; kill -KILL -{pid}"])
    result = _run(session_ctx, command="sleep 30", timeout_s=20)
    killer.wait()
    assert result["exit_code"] is None and result["timed_out"] is False, result
    assert "the sandbox ended" in result["stderr"]
    assert _run(session_ctx, command="echo fine")["stdout"] == "fine\n"
    assert [code for code, _ in notices] == ["sandbox_restarted"]


# -- lifetime ----------------------------------------------------------------------------------
def test_the_sandbox_ends_with_the_session(workspace: Path) -> None:
    with sandbox_context(workspace, "bwrap-session") as ctx:
        _run(ctx, command="true")
        pid = _session(ctx).pid()
    assert pid is not None and wait_gone(pid)


def test_closing_during_a_command_ends_both(workspace: Path) -> None:
    """A loop cancelled while a worker thread still runs a command: nothing waits for it."""
    marker = sleep_marker()
    results: list[dict[str, Any]] = []
    with sandbox_context(workspace, "bwrap-session") as ctx:
        _run(ctx, command="true")
        pid = _session(ctx).pid()
        worker = threading.Thread(
            target=lambda: results.append(_run(ctx, command=f"sleep {marker}", timeout_s=60)))
        worker.start()
        assert gone_after_appearing(marker) is False
    worker.join(10)
    assert not worker.is_alive()
    assert results and results[0]["exit_code"] is None, results
    assert pid is not None and wait_gone(pid)
    assert gone(marker)


def gone_after_appearing(marker: str) -> bool:
    """Wait for ``marker`` to appear; then whether it is already gone (it should not be)."""
    for _ in range(200):
        if marker_pids(marker):
            return False
        time.sleep(0.025)
    raise AssertionError("the command never started")


def test_the_sandbox_ends_with_the_loop_and_restarts_are_journaled(workspace: Path) -> None:
    """:func:`services.runs.loop.execution_sandbox` is what ``run_loop`` opens around the loop."""
    events: list[AgentEvent] = []

    class Journal:
        def emit(self, event: AgentEvent) -> None:
            events.append(event)

    cycles = LastCycle()
    cycles.cycle = 3
    base = command_context(workspace, require_sandbox("bwrap"))
    with pytest.raises(RuntimeError), execution_sandbox(base, Journal(), cycles) as ctx:
        _run(ctx, command="true")
        pid = _session(ctx).pid()
        assert pid is not None
        os.killpg(pid, signal.SIGKILL)
        assert wait_gone(pid)
        _run(ctx, command="true")
        second = _session(ctx).pid()
        raise RuntimeError("the loop was cancelled")
    assert second is not None and wait_gone(second)
    assert [(e.kind, e.cycle, e.data["code"]) for e in events] == [
        (AgentEventKind.WARNING, 3, "sandbox_restarted")]


HARNESS_THAT_DIES = textwrap.dedent("""
    import json, os, signal, sys, threading
    from pathlib import Path
    from services.execution.sandbox.selection import select_sandbox
    from services.execution.tool_domains.command.tools import RunArgs, run
    from services.execution.tool_domains.context import ToolDomainContext
    workspace = Path(sys.argv[1])
    sandbox = select_sandbox("bwrap")
    with sandbox.session(workspace, lambda code, text: None) as session:
        ctx = ToolDomainContext(workspace_root=workspace, execution_id="e", request_id="r",
                                correlation_id="c", sandbox=session)
        run(RunArgs(argv=["true"]), ctx)
        print(json.dumps({"bwrap": session.pid()}), flush=True)
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
        run(RunArgs(command="sleep " + sys.argv[2]), ctx)
""")


def test_the_sandbox_dies_with_the_harness(workspace: Path) -> None:
    require_sandbox("bwrap")
    marker = sleep_marker()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "app" / "backend" / "src")}
    proc = subprocess.run([sys.executable, "-c", HARNESS_THAT_DIES, str(workspace), marker],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    pid = json.loads(proc.stdout.splitlines()[0])["bwrap"]
    assert wait_gone(pid), "bwrap outlived the harness"
    assert gone(marker), "the command outlived the harness"
