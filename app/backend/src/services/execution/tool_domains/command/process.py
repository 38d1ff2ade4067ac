"""Run one prepared command: own session, bounded output, the whole group killed at the deadline.

stdout and stderr are read together in one loop (a selector over both pipes and a pidfd that
signals the exit), so neither can fill its pipe and block the other. Each stream keeps its first
and last bytes only (:class:`HeadTail`), whatever the command prints.

When the command's main process exits, what is left of its process group (background jobs) is
killed, and the pipes are drained for a short grace period; at the deadline the whole group is
killed. Under a per-command bubblewrap, killing the group kills ``bwrap``, whose
``--die-with-parent`` takes the sandbox's PID namespace, and every process in it, down too.

A command prepared by a long-lived sandbox
(:attr:`~services.execution.ports.PreparedCommand.launch`) is started by that sandbox's
supervisor instead: the runner reads the same two pipes, learns the exit from the sandbox's
control channel (sent once every other process of the command is dead) and, at the deadline,
asks the sandbox to kill the command; a sandbox that does not answer then is ended whole.
"""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import LaunchedCommand, PreparedCommand

READ_CHUNK = 64 * 1024
DRAIN_GRACE_S = 2.0
# How often a running command asks whether it is to stop (a cancelled flowchart run).
STOP_POLL_S = 0.5
TRUNCATION_MARKER = "\n...[truncated {n} bytes]...\n"


class HeadTail:
    """Keeps the first ``cap // 2`` and the last ``cap - cap // 2`` bytes of a stream."""

    def __init__(self, cap: int) -> None:
        cap = max(cap, 2)
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_cap:  # trim in batches, not on every chunk
                del self.tail[: len(self.tail) - self.tail_cap]

    @property
    def dropped(self) -> int:
        return self.total - len(self.head) - min(len(self.tail), self.tail_cap)

    def text(self) -> str:
        """The captured text, UTF-8 decoded with replacement, with a marker where bytes were cut."""
        tail = bytes(self.tail[-self.tail_cap :]) if self.tail else b""
        if self.dropped == 0:
            return (bytes(self.head) + tail).decode("utf-8", "replace")
        return (
            bytes(self.head).decode("utf-8", "replace")
            + TRUNCATION_MARKER.format(n=self.dropped)
            + tail.decode("utf-8", "replace")
        )


@dataclass(frozen=True)
class CommandOutcome:
    """What happened to one command."""

    exit_code: int | None
    signal: str | None
    stdout: HeadTail
    stderr: HeadTail
    timed_out: bool
    duration_ms: float


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
        os.killpg(pgid, signal.SIGKILL)


def _exited(pid: int) -> bool:
    """Whether ``pid`` has exited, without reaping it (so its group id cannot be reused)."""
    try:
        found = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return found is not None


OutputSink = Callable[[str, bytes], None]  # (stream name, chunk) as it is read


class _Pump:
    """The read loop over both pipes and the exit notification.

    ``exit_fd`` becomes readable once the command ended (a pidfd, or a long-lived sandbox's
    control channel), then ``on_exit`` runs once; ``poll_exit`` stands in where there is no such
    descriptor (no pidfd on an old kernel).
    """

    def __init__(self, pipes: Sequence[int], cap: int, exit_fd: int | None,
                 on_exit: Callable[[], None], poll_exit: Callable[[], bool] | None = None,
                 on_output: OutputSink | None = None) -> None:
        self.on_output = on_output
        self.out = HeadTail(cap)
        self.err = HeadTail(cap)
        self.selector = selectors.DefaultSelector()
        self.open_pipes = 0
        self.exit_fd = exit_fd
        self.on_exit = on_exit
        self.stopped = False
        self.poll_exit = poll_exit
        for fd, sink in zip(pipes, (self.out, self.err), strict=True):
            self.selector.register(fd, selectors.EVENT_READ, sink)
            self.open_pipes += 1
        if exit_fd is not None:
            self.selector.register(exit_fd, selectors.EVENT_READ, None)

    def close(self) -> None:
        self.selector.close()

    def _exit_seen(self) -> None:
        if self.exit_fd is not None:
            self.selector.unregister(self.exit_fd)
            self.exit_fd = None
        self.on_exit()

    def run_until(self, deadline: float,
                  should_stop: Callable[[], bool] | None = None) -> bool:
        """Read until the main process exited and both pipes closed, or ``deadline``, or
        ``should_stop`` answers True (asked every :data:`STOP_POLL_S`; ``stopped`` is then set).

        True if the main process exited (a command that closes its pipes early is still waited
        for; one whose background jobs keep the pipes open gets a short grace after its exit).
        """
        exited = False
        next_stop_check = time.monotonic() + STOP_POLL_S
        while self.open_pipes or not exited:
            now = time.monotonic()
            remaining = deadline - now
            if remaining <= 0:
                break
            if should_stop is not None and not exited:
                if now >= next_stop_check:
                    if should_stop():
                        self.stopped = True
                        break
                    next_stop_check = now + STOP_POLL_S
                remaining = min(remaining, next_stop_check - now)
            polling = self.exit_fd is None and not exited
            for key, _ in self.selector.select(min(remaining, 0.05) if polling else remaining):
                if key.data is None:
                    exited = True
                    self._exit_seen()
                    deadline = min(deadline, time.monotonic() + DRAIN_GRACE_S)
                elif not self._read(key):
                    self.open_pipes -= 1
            if polling and self.poll_exit is not None and self.poll_exit():
                exited = True
                self.on_exit()
                deadline = min(deadline, time.monotonic() + DRAIN_GRACE_S)
        return exited

    def _read(self, key: selectors.SelectorKey) -> bool:
        """Read one chunk; False (and unregistered) at end of file."""
        data = os.read(key.fd, READ_CHUNK)
        if data:
            key.data.feed(data)
            if self.on_output is not None:
                self.on_output("stdout" if key.data is self.out else "stderr", data)
            return True
        self.selector.unregister(key.fileobj)
        return False


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # no pidfd (old kernel): poll the exit instead


def _spawn(prepared: PreparedCommand) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(
            prepared.argv, env=prepared.env, cwd=prepared.cwd, preexec_fn=prepared.preexec,
            stdin=subprocess.DEVNULL if prepared.stdin is None else prepared.stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, close_fds=True, pass_fds=prepared.pass_fds,
        )
    except subprocess.SubprocessError as exc:  # the sandbox's preexec failed in the child
        raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                          f"the sandbox could not be applied: {exc}") from None
    finally:
        prepared.close_fds()


def _not_started(exc: OSError, started: float, cap: int) -> CommandOutcome:
    """A command that could not be executed answers like a shell would (127 / 126)."""
    err = HeadTail(cap)
    err.feed(f"cannot execute: {exc.strerror or exc}\n".encode())
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    return CommandOutcome(code, None, HeadTail(cap), err, False, _ms(started))


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000, 3)


def run_prepared(prepared: PreparedCommand, *, timeout_s: float, cap: int,
                 on_output: OutputSink | None = None,
                 should_stop: Callable[[], bool] | None = None) -> CommandOutcome:
    """Start ``prepared`` in a new session and collect its capped output until exit or timeout;
    ``on_output`` (per-command bubblewrap and no sandbox) sees each chunk as it is read. Once
    ``should_stop`` answers True the command is killed as at its timeout (``SIGKILL``, not
    ``timed_out``)."""
    if prepared.launch is not None:
        return _run_launched(prepared.launch, timeout_s=timeout_s, cap=cap,
                             should_stop=should_stop)
    started = time.monotonic()
    try:
        proc = _spawn(prepared)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
        _finish(prepared)
        return _not_started(exc, started, cap)
    except BaseException:
        _finish(prepared)
        raise
    _release(prepared, proc)
    pidfd = _pidfd(proc.pid)
    pipes = [p.fileno() for p in (proc.stdout, proc.stderr) if p is not None]
    # At the exit, what is left of the group is killed; the leader is a zombie, not reaped.
    pump = _Pump(pipes, cap, pidfd, functools.partial(_kill_group, proc.pid),
                 functools.partial(_exited, proc.pid), on_output)
    try:
        exited = pump.run_until(started + timeout_s, should_stop)
        if not exited:
            _kill_group(proc.pid)
            pump.run_until(time.monotonic() + DRAIN_GRACE_S)
    finally:
        pump.close()
        if pidfd is not None:
            os.close(pidfd)
        _close(proc.stdout, proc.stderr)
        _kill_group(proc.pid)  # safe: the leader is not reaped before wait()
        returncode = proc.wait()
        _finish(prepared)
    if not exited:
        return CommandOutcome(None, "SIGKILL", pump.out, pump.err, not pump.stopped,
                              _ms(started))
    sig = signal.Signals(-returncode).name if returncode < 0 else None
    return CommandOutcome(returncode, sig, pump.out, pump.err, False, _ms(started))


SANDBOX_ENDED_NOTE = b"\n[the sandbox ended during this command; the next one starts a new one]\n"


def _run_launched(launch: Callable[[], LaunchedCommand], *, timeout_s: float,
                  cap: int, should_stop: Callable[[], bool] | None = None) -> CommandOutcome:
    """Run a command in a long-lived sandbox: it reports the exit once nothing else of the
    command is left, so the pipes are at end of file by then."""
    started = time.monotonic()
    command = launch()
    status: list[int | None] = []

    def on_exit() -> None:
        status.append(command.exit_status())

    pump = _Pump([command.stdout, command.stderr], cap, command.exit_fd, on_exit)
    try:
        exited = pump.run_until(started + timeout_s, should_stop)
        if not exited:
            command.kill()
            if not pump.run_until(time.monotonic() + DRAIN_GRACE_S):
                command.abandon()
    finally:
        pump.close()
        os.close(command.stdout)
        os.close(command.stderr)
        command.release()
    code = status[0] if status else None
    if code is None:
        if exited:
            pump.err.feed(SANDBOX_ENDED_NOTE)
        return CommandOutcome(None, "SIGKILL", pump.out, pump.err,
                              not exited and not pump.stopped, _ms(started))
    if not exited:
        return CommandOutcome(None, "SIGKILL", pump.out, pump.err, not pump.stopped,
                              _ms(started))
    sig = signal.Signals(-code).name if code < 0 else None
    return CommandOutcome(code, sig, pump.out, pump.err, False, _ms(started))


def _release(prepared: PreparedCommand, proc: subprocess.Popen[bytes]) -> None:
    """Let the sandbox place the started child (cgroup, limits); it waits for that."""
    if prepared.on_start is None:
        return
    try:
        prepared.on_start(proc.pid)
    except OSError as exc:
        _kill_group(proc.pid)
        proc.communicate()
        _finish(prepared)
        raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                          f"the command's limits could not be applied: {exc}") from None


def _finish(prepared: PreparedCommand) -> None:
    """Whatever the sandbox does after a command: every process left in its group killed."""
    if prepared.finish is not None:
        prepared.finish()


def _close(*pipes: IO[bytes] | None) -> None:
    for pipe in pipes:
        if pipe is not None:
            pipe.close()
