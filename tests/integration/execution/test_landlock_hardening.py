"""Issue 19: Landlock mode against a hostile command (run as root, as CI does).

Before: a ``setsid`` child outlived its command and could race the harness's workspace tools;
the command kept root's capabilities (``mknod`` of a character device read the host's kernel
log), could signal the harness's processes and reached loopback TCP. Each test failed then.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from services.execution.sandbox import landlock as sandbox_landlock
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.workspace import tools as workspace_domain
from tests.unit.execution.command_helpers import (
    command_context,
    gone,
    require_sandbox,
    run_command,
    sleep_marker,
)

pytestmark = pytest.mark.sandbox



@pytest.fixture
def ctx(workspace: Path) -> ToolDomainContext:
    (workspace / "d").mkdir()  # Landlock: the root gets no new entries from a command
    return command_context(workspace, require_sandbox("landlock"))


def _run(ctx: ToolDomainContext, **args: Any) -> dict[str, Any]:
    envelope = run_command(ctx, **args)
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    assert result["sandbox"] == "landlock"
    return result


def test_no_process_outlives_its_command(ctx: ToolDomainContext) -> None:
    marker = sleep_marker()
    script = f"setsid sleep {marker} >/dev/null 2>&1 < /dev/null & echo started"
    result = _run(ctx, command=script)
    assert result["exit_code"] == 0 and "started" in result["stdout"]
    assert gone(marker), "a setsid child outlived its Landlock command"


# Swaps d/sub for a link to the outside and back until the test leaves d/stop; self-healing (a
# harness write may make a new d/sub while it is away, which the next round removes).
SWAPPER = """
cd d
while [ ! -e stop ]; do
  rm -rf sub.real
  mv -T sub sub.real && ln -sT ../../outside sub
  sleep 0.001
  rm -rf sub
  mv -T sub.real sub
done
echo stopped
"""
ENOUGH_REFUSALS = 10
RACE_S = 90.0  # an upper bound for the race, never a performance assertion


def test_a_leftover_swapper_never_leads_the_tools_outside(
    ctx: ToolDomainContext, workspace: Path
) -> None:
    """A command that keeps swapping a directory for a link to the outside while the harness
    reads and writes through it: no outside byte is read, no outside file is made. The race
    goes on until some calls met the link and were refused (``path_outside_workspace``): a run
    in which the swap never coincided with a call would prove nothing."""
    (workspace / "d" / "sub").mkdir()
    (workspace / "d" / "sub" / "secret.txt").write_text("inside\n")
    dispatcher = Dispatcher(ToolRegistry(workspace_domain.SPECS))
    seen: list[dict[str, Any]] = []
    refused: list[str] = []

    def hammer() -> None:
        count, stop = 0, time.monotonic() + RACE_S
        while len(refused) < ENOUGH_REFUSALS and time.monotonic() < stop:
            count += 1
            for name, args in (("read_file", {"path": "d/sub/secret.txt"}),
                               ("write_file", {"path": "d/sub/planted.txt", "content": "x"})):
                call = dispatcher.normalize(f"c{count}{name}", f"workspace_{name}", args)
                envelope = dispatcher.dispatch(call, ctx).model_dump(mode="json")
                seen.append(envelope)
                if (envelope.get("error") or {}).get("code") == "path_outside_workspace":
                    refused.append(name)
        (workspace / "d" / "stop").touch()

    worker = threading.Thread(target=hammer)
    worker.start()
    result = _run(ctx, command=SWAPPER, timeout_s=RACE_S + 30)
    worker.join()
    assert result["stdout"].strip().endswith("stopped"), result  # it swapped until told
    assert len(refused) >= ENOUGH_REFUSALS, (len(seen), refused)
    assert not any("TOP-SECRET-OUTSIDE" in str(e.get("result")) for e in seen)
    assert not (workspace.parent / "outside" / "planted.txt").exists()


def test_no_device_node_can_be_made(ctx: ToolDomainContext, workspace: Path) -> None:
    result = _run(ctx, command="mknod d/kmsg c 1 11 && head -c 200 d/kmsg")
    assert result["exit_code"] != 0, result
    assert not (workspace / "d" / "kmsg").exists()


# A harness process that reports each signal it gets on stdout, one name a line.
HOLDER = """
import signal, sys
def report(number, _frame):
    print(signal.Signals(number).name, flush=True)
for name in ("SIGTERM", "SIGUSR1"):
    signal.signal(getattr(signal, name), report)
print("ready", flush=True)
while True:
    signal.pause()
"""


def test_the_harness_processes_cannot_be_signalled(ctx: ToolDomainContext) -> None:
    """The command's ``kill`` is refused (``EPERM``); the harness process then gets a signal
    from the harness itself (the control: it does report signals) and reports that one alone.
    A ``SIGTERM`` sent before would have been pending by then and reported with it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    try:
        assert holder.stdout.readline() == "ready\n"
        result = _run(ctx, command=f"kill -TERM {holder.pid}")
        assert result["exit_code"] != 0, result
        assert os.strerror(errno.EPERM) in result["stderr"], result
        holder.send_signal(signal.SIGUSR1)
        assert holder.stdout.readline() == "SIGUSR1\n"
    finally:
        holder.kill()
        rest, _ = holder.communicate(timeout=30)
    assert "SIGTERM" not in rest, rest


CONNECT = "import socket, sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3)"


def test_loopback_tcp_is_unreachable(ctx: ToolDomainContext) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        result = _run(ctx, argv=["python3", "-c", CONNECT, str(port)])
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert result["exit_code"] != 0, result
    bind = "import socket; socket.socket().bind(('127.0.0.1', 0))"
    bound = _run(ctx, argv=["python3", "-c", bind])
    assert bound["exit_code"] != 0, bound


def test_landlock_is_refused_without_scoping_or_a_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sandbox_landlock.landlock_problem() is None
    monkeypatch.setattr(sandbox_landlock, "abi_version", lambda: 5)
    assert "scoping" in (sandbox_landlock.landlock_problem() or "")
    monkeypatch.setattr(sandbox_landlock, "abi_version", lambda: 7)
    monkeypatch.setattr(sandbox_landlock, "cgroup_layout", lambda: None)
    assert "cgroup" in (sandbox_landlock.landlock_problem() or "")
