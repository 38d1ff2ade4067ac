"""One bubblewrap sandbox for the life of an execution, with a supervisor as its PID 1.

Starting ``bwrap`` costs 10 to 20 ms on this kind of host; an execution runs dozens to hundreds
of commands. :class:`BwrapSession` starts the sandbox on the execution's first command and asks
its supervisor (:mod:`~services.execution.sandbox.supervisor`) to run each command in it:

* the sandbox is the one :class:`~services.execution.sandbox.selection.BwrapSandbox` builds per
  command (same namespaces, file-system layout, uid, dropped capabilities, seccomp filter), with
  ``--as-pid-1`` so that the supervisor is PID 1 of the PID namespace;
* resource limits: the sandbox starts behind the same gate as a per-command ``bwrap``, so its
  cgroup (memory, processes) and rlimits hold for everything in it; only one command runs at a
  time and the supervisor kills every other process when it ends, so they are that command's
  limits (the supervisor itself, a few MB and one process, counts too). Rlimits such as
  ``RLIMIT_CPU`` count per process and start again for each command;
* each command gets its own pipes (their write ends travel to the supervisor as ``SCM_RIGHTS``),
  its environment (built and scrubbed per command by the command domain) and its working
  directory; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are emptied between commands;
* the control channel is an inherited socket pair, not a path in the sandbox (see the
  supervisor's docstring); a command can neither reach it nor read another command's output;
* if the sandbox dies (its supervisor ended, was killed from outside, or stopped answering), the
  next command starts a new one and ``notify("sandbox_restarted", ...)`` reports it;
* lifetime: a thread of the harness owns the ``bwrap`` process (``--die-with-parent`` ties the
  sandbox to the thread that started it, so not to a pool thread that may go away); the session
  is closed when the execution's loop ends, and a harness that dies takes it down with it.

Commands run one at a time (a lock): a second command waits for the first to end.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import CommandSandbox, PreparedCommand
from services.execution.sandbox import supervisor
from services.execution.sandbox.cgroup import with_limits
from services.execution.sandbox.layout import (
    SYSTEM_SEARCH_PATH,
    bwrap_workspace_args,
    sandbox_python,
)
from services.execution.sandbox.seccomp import program_fd

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 20.0
CLOSE_TIMEOUT_S = 5.0
SANDBOX_HOME = "/tmp/home"
SANDBOX_TMP = "/tmp"
Notify = Callable[[str, str], None]


@functools.cache
def supervisor_source() -> bytes:
    """The supervisor's text (run from a memory file: the source tree may be hidden inside)."""
    return Path(supervisor.__file__).read_bytes()


def _memory_file(name: str, data: bytes) -> int:
    """A memory file holding ``data``, at offset 0 (the caller closes it)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def _script_fd() -> int:
    """A memory file holding the supervisor, inherited by the sandbox (the caller closes it)."""
    return _memory_file("studio-supervisor", supervisor_source())


class _Sandbox:
    """One started sandbox: the ``bwrap`` process (owned by a thread) and the control channel."""

    def __init__(self, executable: str, system_args: Sequence[str], limits: Any,
                 workspace: Path) -> None:
        self.channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            seccomp = program_fd()
            script = _script_fd()
        except OSError:
            self.channel.close()
            theirs.close()
            raise
        argv = [
            executable, *system_args, "--as-pid-1",
            "--seccomp", str(seccomp),
            *bwrap_workspace_args(workspace),
            "--remount-ro", "/",
            "--chdir", str(workspace),
            "--clearenv", "--setenv", "PATH", SYSTEM_SEARCH_PATH,
            "--",
            sandbox_python(), "-I", "-S", f"/proc/self/fd/{script}", str(theirs.fileno()),
        ]
        self.prepared = with_limits(PreparedCommand(
            argv=argv, env={"PATH": SYSTEM_SEARCH_PATH}, cwd=workspace,
            pass_fds=(seccomp, script, theirs.fileno()),
        ), limits)
        self._theirs = theirs
        self.proc: subprocess.Popen[bytes] | None = None
        self.ended = threading.Event()
        self.stderr = b""
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self.thread = threading.Thread(target=self._own, name="studio-sandbox", daemon=True)

    # -- the owning thread ------------------------------------------------------------------
    def start(self) -> None:
        """Start ``bwrap`` in the owning thread and wait for the supervisor's ``ready``."""
        self.thread.start()
        self._started.wait()
        if self._start_error is not None:
            self.close()
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                              f"the sandbox could not be started: {self._start_error}") from None
        self.channel.settimeout(READY_TIMEOUT_S)
        try:
            hello = self.channel.recv(supervisor.MAX_MESSAGE)
        except OSError:
            hello = b""
        finally:
            self.channel.settimeout(None)
        if not hello or json.loads(hello).get("op") != "ready":
            self.close()
            detail = self.stderr.decode("utf-8", "replace").strip()[:500]
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                              f"the sandbox did not start: {detail or 'no answer'}")

    def _own(self) -> None:
        prepared = self.prepared
        try:
            proc = subprocess.Popen(
                prepared.argv, env=prepared.env, cwd=prepared.cwd,
                stdin=subprocess.DEVNULL if prepared.stdin is None else prepared.stdin,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True, pass_fds=prepared.pass_fds,
            )
        except BaseException as exc:  # reported by start(); this thread just ends
            self._start_error = exc
            prepared.close_fds()  # the sandbox's end of the channel among them
            self._theirs.detach()
            self._finish()
            self.ended.set()
            self._started.set()
            return
        prepared.close_fds()
        self._theirs.detach()
        self.proc = proc
        try:
            if prepared.on_start is not None:
                prepared.on_start(proc.pid)
        except OSError as exc:
            self._start_error = exc
            self._kill()
        self._started.set()
        try:
            _, self.stderr = proc.communicate()
        finally:
            self._finish()
            self.ended.set()
        if proc.returncode not in (0, None):
            log.info("sandbox %d ended with %s: %s", proc.pid, proc.returncode,
                     self.stderr.decode("utf-8", "replace").strip()[:500])

    def _finish(self) -> None:
        if self.prepared.finish is not None:
            self.prepared.finish()  # kills whatever is left in the sandbox's cgroup

    def abandon_process(self) -> None:
        """Kill the sandbox's processes, leaving the channel to whoever is reading it."""
        self._kill()

    def _kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)

    # -- from the harness -------------------------------------------------------------------
    @property
    def alive(self) -> bool:
        return not self.ended.is_set() and self.channel.fileno() >= 0

    def close(self) -> None:
        """End the sandbox: the supervisor sees end of file and exits (taking every process of
        its namespace with it); one that does not is killed."""
        with contextlib.suppress(OSError):
            self.channel.close()
        if self.thread.is_alive() and not self.ended.wait(CLOSE_TIMEOUT_S):
            self._kill()
        if self.thread.is_alive():
            self.thread.join(CLOSE_TIMEOUT_S)

    def abandon(self) -> None:
        """Kill the sandbox now (it stopped answering)."""
        self._kill()
        with contextlib.suppress(OSError):
            self.channel.close()


class _SessionCommand:
    """One command running in a :class:`_Sandbox` (the runner's view, ``LaunchedCommand``)."""

    def __init__(self, box: _Sandbox, stdout: int, stderr: int,
                 release: Callable[[], None]) -> None:
        self.box = box
        self.stdout = stdout
        self.stderr = stderr
        self.exit_fd = box.channel.fileno()
        self._release = release
        self._released = False

    def exit_status(self) -> int | None:
        try:
            answer = self.box.channel.recv(supervisor.MAX_MESSAGE)
        except OSError:
            answer = b""
        if not answer:
            self.box.abandon()
            return None
        message = json.loads(answer)
        if message.get("op") != "exited":
            self.box.abandon()
            return None
        return int(message["status"])

    def kill(self) -> None:
        try:
            self.box.channel.send(json.dumps({"op": "kill"}).encode())
        except OSError:
            self.box.abandon()

    def abandon(self) -> None:
        self.box.abandon()

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._release()


class BwrapSession:
    """The :class:`~services.execution.ports.CommandSandbox` of one execution under bubblewrap.

    Commands in ``workspace`` run in the long-lived sandbox; a command in another workspace
    (never asked by the engine) falls back to a per-command ``bwrap``.
    """

    def __init__(self, per_command: Any, workspace: Path, notify: Notify) -> None:
        self.per_command = per_command
        self.workspace = Path(os.path.realpath(workspace))
        self.notify = notify
        self.lock = threading.Lock()
        self.box: _Sandbox | None = None
        self.starts = 0
        self.closed = False

    @property
    def mode(self) -> str:
        return str(self.per_command.mode)

    def session(self, workspace: Path, notify: Notify) -> contextlib.AbstractContextManager[
            CommandSandbox]:
        return contextlib.nullcontext(self)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        if Path(os.path.realpath(workspace)) != self.workspace or self.closed:
            prepared: PreparedCommand = self.per_command.prepare(
                argv, workspace=workspace, cwd=cwd, env=env)
            return prepared
        inner = dict(env)
        inner["HOME"] = SANDBOX_HOME
        inner["TMPDIR"] = SANDBOX_TMP
        request = {"argv": list(argv), "env": inner, "cwd": str(cwd)}

        def launch() -> _SessionCommand:
            return self._launch(request)

        return PreparedCommand(argv=list(argv), env=inner, cwd=cwd, launch=launch)

    def _sandbox(self) -> _Sandbox:
        """The running sandbox, started (again) if there is none (caller holds the lock)."""
        if self.box is not None and self.box.alive:
            return self.box
        if self.box is not None:
            self.box.close()
            detail = self.box.stderr.decode("utf-8", "replace").strip()[:200]
            self.notify("sandbox_restarted",
                        "the execution's sandbox ended; this command runs in a new one"
                        + (f" ({detail})" if detail else ""))
            log.warning("sandbox of %s ended; starting a new one", self.workspace)
        self.box = None
        try:
            box = _Sandbox(self.per_command.executable, self.per_command.system_args,
                           self.per_command.limits, self.workspace)
        except OSError as exc:
            raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                              f"the sandbox could not be prepared: {exc}") from None
        box.start()
        self.starts += 1
        self.box = box
        return box

    def _launch(self, request: dict[str, Any]) -> _SessionCommand:
        self.lock.acquire()
        try:
            return self._send(request, retry=True)
        except BaseException:
            self.lock.release()
            raise

    def _send(self, request: dict[str, Any], *, retry: bool) -> _SessionCommand:
        box = self._sandbox()
        body = _memory_file("studio-request", json.dumps(request).encode())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            # The request itself travels in a memory file: a packet is bounded by the socket's
            # buffer, a command's arguments and environment may take megabytes.
            socket.send_fds(box.channel, [supervisor.RUN], [out_w, err_w, body])
        except OSError:
            os.close(out_r)
            os.close(err_r)
            box.abandon()
            box.ended.wait(CLOSE_TIMEOUT_S)
            if not retry:
                raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                                  "the sandbox stopped answering") from None
            return self._send(request, retry=False)
        finally:
            for fd in (out_w, err_w, body):
                os.close(fd)
        return _SessionCommand(box, out_r, err_r, self.lock.release)

    def close(self) -> None:
        """End the sandbox (idempotent); later commands run with a per-command ``bwrap``.

        A command still running (a loop cancelled while a worker thread runs it) is not waited
        for: shutting the channel down makes the supervisor kill it and exit, and the runner
        sees the sandbox end.
        """
        self.closed = True
        box = self.box
        if box is not None:
            with contextlib.suppress(OSError):
                box.channel.shutdown(socket.SHUT_RDWR)
        if not self.lock.acquire(timeout=CLOSE_TIMEOUT_S):
            # Still not over: end the sandbox; the runner, which owns the channel while its
            # command runs, sees it end and closes it.
            if box is not None:
                box.abandon_process()
            return
        try:
            if self.box is not None:
                self.box.close()
                self.box = None
        finally:
            self.lock.release()

    def pid(self) -> int | None:
        """The ``bwrap`` process of the running sandbox (for tests and diagnostics)."""
        box = self.box
        return box.proc.pid if box is not None and box.proc is not None else None


@contextlib.contextmanager
def bwrap_session(per_command: Any, workspace: Path, notify: Notify) -> Iterator[BwrapSession]:
    """A :class:`BwrapSession` closed when the block ends, however it ends."""
    session = BwrapSession(per_command, workspace, notify)
    try:
        yield session
    finally:
        session.close()


def wait_gone(pid: int, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Whether process ``pid`` is gone within ``timeout_s`` (tests and the benchmark)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.01)
    return False
