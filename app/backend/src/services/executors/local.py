"""The local substrate: ``studio execute <execution_id>`` as a subprocess of this process.

The child

* gets exactly the environment the caller hands over (build it with
  :func:`executor_environment`; the parent's environment is never inherited wholesale);
* leads its own process group, so :meth:`LocalSubstrate.cancel` kills it with everything it
  started (agent commands, git, the Claude Code CLI);
* dies with its parent: ``PR_SET_PDEATHSIG`` (Linux) sends it ``SIGKILL`` when the parent goes
  away, so a crashed worker leaves no orphan executing on; the lease then expires and the
  execution is re-dispatched.

Linux delivers the parent-death signal when the *thread* that forked exits, not the process:
call :meth:`LocalSubstrate.launch` from a long-lived thread (a worker's main thread), never from a
short-lived pool thread.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO

from services.execution.errors import SubstrateError
from services.execution.providers.cloud_auth import modes_in
from services.executors.base import Handle, SubstrateStatus
from services.settings import TELEMETRY_VARIABLES, TRACE_CONTEXT_VARIABLES

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
DEFAULT_STUDIO_ARGV: tuple[str, ...] = (sys.executable, "-m", "services.cli")

# What ``studio execute`` needs from its parent's environment, and nothing else; the providers'
# variables are those of the configured auth modes (:func:`executor_environment`).
EXECUTOR_ENV_NAMES: tuple[str, ...] = (
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TMPDIR",
    "TZ",
    *TELEMETRY_VARIABLES,  # where traces go and metrics are written (not the OTLP headers)
    *TRACE_CONTEXT_VARIABLES,  # the span that started the child
)
EXECUTOR_ENV_PREFIXES: tuple[str, ...] = ("STUDIO_",)


def executor_environment(
    source: Mapping[str, str], *, extra_names: Iterable[str] = ()
) -> dict[str, str]:
    """The allowlisted part of ``source`` (normally ``settings.process_environment()``).

    Keeps every ``STUDIO_*`` variable (database URL, GitHub token, secret key, sandbox mode), the
    variables of each provider's auth mode as ``source``'s ``STUDIO_*_AUTH`` name it (credentials,
    base URLs, region, project...; :mod:`services.executors.cloud_env`), and the locale; drops
    everything else.
    """
    names = set(EXECUTOR_ENV_NAMES) | set(extra_names) | _auth_names(source)
    return {
        name: value
        for name, value in source.items()
        if name in names or name.startswith(EXECUTOR_ENV_PREFIXES)
    }


def _auth_names(source: Mapping[str, str]) -> set[str]:
    """The variables of the auth modes ``source`` configures (their fixed switches excepted: the
    child's engine sets those itself)."""
    names: set[str] = set()
    for mode in modes_in(source).values():
        names |= mode.names - set(mode.fixed)
    return names


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A ``preexec_fn``: ask for SIGKILL when the parent dies; exit if it is already gone."""
    # Resolved here, in the parent: no dlopen/dlsym between fork and exec.
    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def preexec() -> None:
        if prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(127)
        # The parent may have died between fork and prctl: then nobody would signal us.
        if os.getppid() != parent_pid:
            os._exit(127)

    return preexec


class LocalSubstrate:
    """Runs each execution as a child process of this one (Linux)."""

    def __init__(
        self,
        studio_argv: Sequence[str] = DEFAULT_STUDIO_ARGV,
        env: Mapping[str, str] | None = None,
        *,
        cwd: Path | None = None,
        log_dir: Path | None = None,
        cancel_grace_s: float = 5.0,
    ) -> None:
        self._argv = list(studio_argv)
        self._env = dict(env or {})
        self._cwd = cwd
        self._log_dir = log_dir
        self._grace = cancel_grace_s
        self._lock = threading.Lock()
        self._processes: dict[int, subprocess.Popen[bytes]] = {}
        self._by_execution: dict[str, Handle] = {}

    @property
    def name(self) -> str:
        return "local"

    def argv_for(self, execution_id: str) -> list[str]:
        """The command line of one execution: ``<studio> execute <execution_id>``."""
        return [*self._argv, "execute", execution_id]

    def launch(self, execution_id: str) -> Handle:
        with self._lock:
            known = self._by_execution.get(execution_id)
            if known is not None and self._poll(known) is SubstrateStatus.RUNNING:
                return known
            process = self._spawn(execution_id)
            handle = Handle(substrate=self.name, execution_id=execution_id, ref=str(process.pid))
            self._processes[process.pid] = process
            self._by_execution[execution_id] = handle
        log.info("local substrate: execution %s runs as pid %d", execution_id, process.pid)
        return handle

    def status(self, handle: Handle) -> SubstrateStatus:
        with self._lock:
            return self._poll(handle)

    def wait(self, handle: Handle, timeout: float) -> SubstrateStatus:
        process = self._process(handle)
        if process is None:
            return SubstrateStatus.UNKNOWN
        try:
            process.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return SubstrateStatus.RUNNING
        return _from_returncode(process.returncode)

    def cancel(self, handle: Handle) -> None:
        """SIGTERM to the group, then SIGKILL to the group and every process it had started.

        Agent commands run in sessions of their own (the command domain's process groups), so the
        group alone would miss them: their pids are collected from ``/proc`` before signalling.
        Cancelling a handle this instance did not launch is a no-op.
        """
        process = self._process(handle)
        if process is None:
            return
        below = descendants(process.pid)
        if process.poll() is None:
            _kill_group(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self._grace)
            except subprocess.TimeoutExpired:
                log.warning("local substrate: pid %d ignored SIGTERM, killing", process.pid)
        _kill_group(process.pid, signal.SIGKILL)
        for pid in below:
            _kill_group(pid, signal.SIGKILL, whole_group=False)
        process.wait()

    def _spawn(self, execution_id: str) -> subprocess.Popen[bytes]:
        # Diagnostics of the child go to our stderr (fd 2), never to our machine-readable stdout.
        output: IO[bytes] | int = 2
        log_file: IO[bytes] | None = None
        if self._log_dir is not None:
            self._log_dir.mkdir(parents=True, exist_ok=True)
            log_file = (self._log_dir / f"{execution_id}.log").open("ab")
            output = log_file
        try:
            return subprocess.Popen(
                self.argv_for(execution_id),
                env=self._env,
                cwd=self._cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                process_group=0,
                preexec_fn=_die_with_parent(os.getpid()),
                close_fds=True,
            )
        except OSError as exc:
            raise SubstrateError(
                f"could not start the executor process: {exc.strerror or exc}",
                details={"reason": "spawn_failed", "execution_id": execution_id},
            ) from exc
        finally:
            if log_file is not None:
                log_file.close()

    def _process(self, handle: Handle) -> subprocess.Popen[bytes] | None:
        with self._lock:
            return self._processes.get(_pid(handle))

    def _poll(self, handle: Handle) -> SubstrateStatus:
        process = self._processes.get(_pid(handle))
        if process is None:
            # Not launched by this substrate instance (children die with their parent, so a
            # handle from an earlier process names nothing we can speak for).
            return SubstrateStatus.UNKNOWN
        code = process.poll()
        return SubstrateStatus.RUNNING if code is None else _from_returncode(code)


def _from_returncode(code: int) -> SubstrateStatus:
    return SubstrateStatus.SUCCEEDED if code == 0 else SubstrateStatus.FAILED


def _pid(handle: Handle) -> int:
    if handle.substrate != "local" or not handle.ref.isdigit():
        raise SubstrateError(
            f"not a local substrate handle: {handle.substrate}/{handle.ref}",
            details={"reason": "invalid_handle"},
        )
    return int(handle.ref)


def _kill_group(pgid: int, sig: signal.Signals, *, whole_group: bool = True) -> None:
    try:
        if whole_group:
            os.killpg(pgid, sig)
        else:
            os.kill(pgid, sig)
    except ProcessLookupError:
        pass  # already gone
    except PermissionError as exc:
        raise SubstrateError(
            f"not allowed to signal process {pgid}",
            details={"reason": "permission_denied", "pid": pgid},
        ) from exc


def kill_descendants(root: int) -> None:
    """SIGKILL every live process below ``root`` (in whatever group or session it runs)."""
    for pid in descendants(root):
        _kill_group(pid, signal.SIGKILL, whole_group=False)


def descendants(root: int) -> list[int]:
    """Every live process below ``root``, from the parent links in ``/proc/<pid>/stat``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # exited while we looked
        # The command name (field 2) is parenthesised and may hold spaces: split after it.
        fields = stat[stat.rindex(")") + 2 :].split()
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: list[int] = []
    pending = [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found
