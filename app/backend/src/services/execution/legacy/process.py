"""The CLI as a confined subprocess in its own process group, its stdout read line by line.

:func:`confine` wraps the CLI with the execution's command sandbox and widens it only where the
CLI needs it:

- ``bwrap``: the same filesystem view as every command (system directories read-only, the
  workspace writable, its ``.git`` read-only, everything else invisible), plus the CLI's own
  directory read-only and the private home directory bound at the sandbox's ``HOME``; its
  network namespace is its own, as every command's: a loopback interface and nothing else
  (the CLI reaches its model through :mod:`.relay` and the harness's :mod:`.keyproxy`);
- ``none`` (development only): no confinement beyond the scrubbed environment and the private
  home (and a parent-death signal, so the CLI does not outlive a crashed harness);
- ``landlock``: refused (``sandbox_unavailable``): it has no network namespace of its own, so
  the CLI could not be kept to its model proxy.

:class:`CliProcess` starts it in a new session (its own process group), collects stdout lines in
a queue from a reader thread, keeps the tail of stderr, and :meth:`CliProcess.kill` ends the
whole group.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import queue
import signal
import subprocess
import threading
from dataclasses import replace
from pathlib import Path

from services.execution.errors import ErrorCode, ExecutionError, ToolFailure
from services.execution.ports import CommandSandbox, PreparedCommand

SANDBOX_HOME = "/tmp/home"  # the HOME every bwrap command gets (services.execution.sandbox)
STDERR_TAIL_BYTES = 4096
MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is cut (its pieces are not stream events)
EOF_MARK = None
PR_SET_PDEATHSIG = 1


def confine(sandbox: CommandSandbox, argv: list[str], env: dict[str, str], *,
            workspace: Path, home: Path, readable: list[Path] | None = None,
            hidden: tuple[str, ...] = ()) -> PreparedCommand:
    """The CLI's command under ``sandbox`` (see the module docstring); ``env["HOME"]`` must be
    :func:`home_inside` of the same sandbox."""
    mode = sandbox.mode
    if mode == "none":
        if hidden:
            raise ExecutionError(
                f"this agent CLI reads {', '.join(hidden)} from the repository and cannot be "
                "told not to: it runs only under bubblewrap, which hides them",
                code=ErrorCode.SANDBOX_UNAVAILABLE)
        return PreparedCommand(argv=argv, env=env, cwd=workspace, preexec=_die_with_parent)
    if mode != "bwrap":
        raise ExecutionError(
            f"the legacy runtime cannot run under the {mode!r} sandbox: the CLI must reach its "
            "model over the network", code=ErrorCode.SANDBOX_UNAVAILABLE)
    try:
        prepared = sandbox.prepare(argv, workspace=workspace, cwd=workspace, env=env)
    except ToolFailure as exc:
        raise ExecutionError(exc.message, code=ErrorCode.SANDBOX_UNAVAILABLE) from None
    wrapped = list(prepared.argv)
    # the CLI's own files, read-only (an operator's CLI may live outside the system dirs),
    # mounted before the root turns read-only (their mount points are created then)
    dirs = readable if readable is not None else [Path(os.path.realpath(argv[0])).parent]
    at = next(i for i, arg in enumerate(wrapped[:-1])
              if arg == "--remount-ro" and wrapped[i + 1] == "/")
    wrapped[at:at] = [arg for d in dirs for arg in ("--ro-bind", str(d), str(d))]
    at = wrapped.index("--chdir")
    masks: list[str] = []
    for name in hidden:  # an empty read-only directory over the repository's own config
        target = workspace / name
        if os.path.lexists(target):
            masks += ["--tmpfs", str(target), "--remount-ro", str(target)]
    wrapped[at:at] = ["--bind", str(home), SANDBOX_HOME, *masks]
    return replace(prepared, argv=wrapped)


def _die_with_parent() -> None:
    """In the child before ``exec``: SIGKILL when the harness dies (bubblewrap does this with
    ``--die-with-parent``; unconfined, the CLI must not outlive a crashed worker)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def home_inside(sandbox: CommandSandbox, home: Path) -> Path:
    """Where the CLI sees its private home."""
    return Path(SANDBOX_HOME) if sandbox.mode == "bwrap" else home


class CliProcess:
    """A started CLI: lines from :meth:`next_line`, :meth:`kill` for the whole group."""

    def __init__(self, prepared: PreparedCommand) -> None:
        self.prepared = prepared
        self.lines: queue.Queue[str | None] = queue.Queue()
        self._stderr = bytearray()
        try:
            self.proc = subprocess.Popen(
                prepared.argv, env=prepared.env, cwd=prepared.cwd,
                preexec_fn=prepared.preexec,
                stdin=subprocess.DEVNULL if prepared.stdin is None else prepared.stdin,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True, pass_fds=prepared.pass_fds)
        except (OSError, subprocess.SubprocessError) as exc:
            self._finish()
            raise ExecutionError(f"the agent CLI could not start: {exc}",
                                 code=ErrorCode.LEGACY_CLI_FAILED) from None
        finally:
            prepared.close_fds()
        if prepared.on_start is not None:
            try:
                prepared.on_start(self.proc.pid)
            except OSError as exc:
                self.kill()
                raise ExecutionError(f"the CLI's limits could not be applied: {exc}",
                                     code=ErrorCode.SANDBOX_UNAVAILABLE) from None
        self.pgid = self.proc.pid
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for thread in self._threads:
            thread.start()

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        while raw := self.proc.stdout.readline(MAX_LINE_BYTES):
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(EOF_MARK)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read(1024) if self.proc.stderr else b"", b""):
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL_BYTES]

    def next_line(self, timeout: float) -> str | None:
        """The next line; ``None`` at end of output; raises ``queue.Empty`` after ``timeout``."""
        return self.lines.get(timeout=timeout)

    def stderr_tail(self) -> str:
        return bytes(self._stderr).decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL to the whole process group (bwrap takes its PID namespace down with it)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid if hasattr(self, "pgid") else self.proc.pid, signal.SIGKILL)

    def wait(self, timeout: float = 10.0) -> int | None:
        """The exit status once it ended (killed after ``timeout``); the group is cleared."""
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        self.kill()  # whatever it left in its group
        for thread in self._threads:
            thread.join(timeout=2.0)
        self._finish()
        return code

    def _finish(self) -> None:
        if self.prepared.finish is not None:
            self.prepared.finish()
