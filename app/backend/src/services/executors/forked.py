"""The fork-server substrate: ``studio execute`` forked from a warm process, not exec'ed.

A worker starts one :class:`ForkServer` (``python -m services.cli.fork_server``): a fresh
interpreter that imports what every execution needs (the engine, the database layer, and the
adapter and SDK of each provider the worker names at the start: those whose credentials its
environment configures, :func:`~services.execution.providers.profiles.configured_providers`;
another provider's SDK with the first execution of that provider, the MCP client with the first
that may start MCP servers) and then only forks. It never opens a database, starts a thread or
sees a secret: its own environment is the non-secret part of the executor environment (locale,
``PATH``, ``HOME``, ``TMPDIR``, the telemetry variables), its command line names providers (only
names the profiles know), and a request to it names an execution id, its provider and whether it
may use MCP, and nothing else.

One execution (:meth:`ForkedSubstrate.launch`):

1. the slot makes a socket pair and sends one end to the server with the execution id and, when
   it knows them, the execution's provider and whether it may start MCP servers (over the
   server's control socket, a private ``SOCK_SEQPACKET`` pair: no path anyone else can
   connect); the first request naming a provider the server has not imported (or MCP) has it
   import that provider's adapter and SDK (or the MCP client) before it forks, for this child
   and every later one: a server imports its deployment's providers and what its executions
   use, nothing else;
2. the server forks; the child closes every descriptor but that socket, leads its own process
   group, asks for ``SIGKILL`` when the server dies (which itself dies with the worker), and the
   server answers the child's pid on the socket;
3. only then does the slot send the environment (exactly what :class:`~services.executors.local.
   LocalSubstrate` would have given the exec'ed child, secrets included) on that socket: the
   child reads it, the server never does, so no execution's secret ever sits in the memory that
   the next child is forked from;
4. the child installs the environment (``os.environ``: what its own subprocesses inherit), and
   runs ``studio execute <id>`` in-process; the server reports its exit status on the socket.

The slot waits on that socket: a blocked read in a thread, no interpreter of its own. Cancelling
signals the child's process group and the processes it started, as for a local child.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from services.execution.errors import SubstrateError
from services.execution.providers.profiles import ADAPTER_MODULES
from services.executors.base import Handle, SubstrateStatus
from services.executors.local import (
    EXECUTOR_ENV_NAMES,
    _die_with_parent,
    _kill_group,
    descendants,
)
from services.settings import TRACE_CONTEXT_VARIABLES

log = logging.getLogger(__name__)

SERVER_MODULE = "services.cli.fork_server"
# The server's last argument: room for a child to write ``<python> -m services.cli execute <id>``
# over the server's command line (``ps`` and ``/proc/<pid>/cmdline`` then name the execution).
TITLE_ROOM = "." * 96
READY = b"ready"
START_TIMEOUT_S = 120.0
REPLY_TIMEOUT_S = 30.0
LENGTH = struct.Struct("!I")


def server_environment(source: Mapping[str, str]) -> dict[str, str]:
    """What the warm process itself runs with: the non-secret names of the executor environment
    (no ``STUDIO_*``, no provider credential, no trace context of any one execution)."""
    names = set(EXECUTOR_ENV_NAMES) - set(TRACE_CONTEXT_VARIABLES)
    return {name: value for name, value in source.items() if name in names}


class ForkServer:
    """The worker's warm process and the control socket to it (one per worker)."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket, *,
                 timeout_s: float = START_TIMEOUT_S) -> None:
        self._process = process
        self._control = control
        self._lock = threading.Lock()
        self._ready = False
        self._failed = False
        self._timeout_s = timeout_s
        self._started = time.monotonic()

    @property
    def pid(self) -> int:
        return self._process.pid

    @classmethod
    def start(cls, environment: Mapping[str, str], *, providers: Iterable[str] = (),
              wait: bool = True, timeout_s: float = START_TIMEOUT_S) -> ForkServer:
        """Start the server; with ``wait``, wait until it has imported everything (otherwise
        the worker starts consuming meanwhile, and its slots exec their children until
        :meth:`ready`). ``providers``: the providers whose adapters and SDKs it imports before
        it is ready (the worker's configured ones); only names of the profiles' table pass, on
        its command line. Call it from a long-lived thread (the worker's main thread): the
        server dies with that thread."""
        names = ",".join(dict.fromkeys(name for name in providers if name in ADAPTER_MODULES))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno()), names, TITLE_ROOM],
                env=server_environment(environment), stdin=subprocess.DEVNULL, stdout=2,
                pass_fds=(theirs.fileno(),), process_group=0,
                preexec_fn=_die_with_parent(os.getpid()))
        except OSError as exc:
            ours.close()
            raise SubstrateError(f"could not start the fork server: {exc.strerror or exc}",
                                 details={"reason": "spawn_failed"}) from exc
        finally:
            theirs.close()
        server = cls(process, ours, timeout_s=timeout_s)
        if wait:
            with server._lock:
                server._await_ready()
        else:  # noted (and logged) as soon as it is ready, or given up once it is late
            threading.Thread(target=server._watch, name="fork-server-ready",
                             daemon=True).start()
        return server

    def _watch(self) -> None:
        """Wait (without the lock: slots ask :meth:`ready` meanwhile) until the server says
        something or is late, then let :meth:`ready` read it."""
        while not self.ready() and not self._failed:
            left = self._started + self._timeout_s - time.monotonic()
            try:
                select.select([self._control], [], [], max(left, 0.0) + 0.1)
            except (OSError, ValueError):  # closed: the worker stops
                return

    def _await_ready(self) -> None:
        """Wait for the server's ``ready`` (once; under the lock)."""
        if self._ready:
            return
        if self._failed:
            raise SubstrateError("the fork server did not start",
                                 details={"reason": "spawn_failed"})
        self._control.settimeout(max(self._started + self._timeout_s - time.monotonic(), 0.0))
        try:
            ready = self._control.recv(64)
        except OSError:
            ready = b""
        finally:
            self._control.settimeout(None)
        if ready != READY:
            self._give_up("it did not say ready")
            raise SubstrateError("the fork server did not start",
                                 details={"reason": "spawn_failed"})
        self._now_ready()

    def ready(self) -> bool:
        """Whether the server has imported everything and serves: never waits. A slot that
        finds it still warming up execs its child instead (as without a fork server), so no
        execution waits for the warm-up: under load it takes a while, and every worker that
        replaces a dead one warms up again. A server not ready ``timeout_s`` after its start
        is stopped (the worker execs every child from then on)."""
        with self._lock:
            if self._ready or self._failed or self._control.fileno() < 0:  # < 0: stopped
                return self._ready
            try:
                said = self._control.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                if time.monotonic() - self._started > self._timeout_s:
                    self._give_up(f"not ready after {self._timeout_s:.0f} s")
                return False
            except OSError:
                said = b""
            if said != READY:
                self._give_up("it did not say ready")
                return False
            self._now_ready()
            return True

    def _now_ready(self) -> None:
        self._ready = True
        log.info("fork server: pid %d ready after %.1f s", self._process.pid,
                 time.monotonic() - self._started)

    def _give_up(self, why: str) -> None:
        """Stop a server that did not start (under the lock)."""
        self._failed = True
        log.warning("fork server: pid %d did not start (%s); executions are exec'ed",
                    self._process.pid, why)
        self._process.kill()
        self._process.wait()

    def alive(self) -> bool:
        return not self._failed and self._process.poll() is None

    def fork(self, execution_id: str, environment: Mapping[str, str],
             provider: str | None = None, mcp: bool = False) -> tuple[int, socket.socket]:
        """Fork ``studio execute <execution_id>`` with ``environment``; its pid and the socket
        its exit status comes on. ``provider`` (the execution's, when known) and ``mcp`` (it may
        start MCP servers) have the server load that provider's SDK and the MCP client first,
        unless it already has."""
        slot, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            fields: dict[str, object] = {"execution_id": execution_id}
            if provider is not None:
                fields["provider"] = provider
            if mcp:
                fields["mcp"] = True
            request = json.dumps(fields).encode()
            with self._lock:
                self._await_ready()
                socket.send_fds(self._control, [request], [child.fileno()])
            child.close()
            slot.settimeout(REPLY_TIMEOUT_S)
            pid = int(json.loads(_read_line(slot, bytearray()))["pid"])
            payload = json.dumps({"env": dict(environment)}).encode()
            slot.sendall(LENGTH.pack(len(payload)) + payload)
        except (OSError, ValueError, KeyError, TypeError, SubstrateError) as exc:
            slot.close()
            child.close()
            raise SubstrateError(f"the fork server did not start the execution: {exc}",
                                 details={"reason": "spawn_failed",
                                          "execution_id": execution_id}) from exc
        return pid, slot

    def stop(self, timeout_s: float = 10.0) -> None:
        """Close the control socket (the server exits once its children have ended)."""
        self._control.close()
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


@dataclass
class _Child:
    pid: int
    channel: socket.socket
    buffer: bytearray = field(default_factory=bytearray)
    code: int | None = None


class ForkedSubstrate:
    """Runs each execution as a child of the worker's :class:`ForkServer` (Linux); ``provider``
    and ``mcp`` (the execution's provider, whether it may start MCP servers, when the caller
    knows them) are passed on with each fork request."""

    def __init__(self, server: ForkServer, env: Mapping[str, str], *,
                 provider: str | None = None, mcp: bool = False,
                 cancel_grace_s: float = 5.0) -> None:
        self._server = server
        self._env = dict(env)
        self._provider = provider
        self._mcp = mcp
        self._grace = cancel_grace_s
        self._lock = threading.Lock()
        self._children: dict[str, _Child] = {}

    @property
    def name(self) -> str:
        return "local"

    def launch(self, execution_id: str) -> Handle:
        with self._lock:
            known = self._children.get(execution_id)
            if known is not None and self._poll(known, 0.0) is SubstrateStatus.RUNNING:
                return _handle(execution_id, known.pid)
            pid, channel = self._server.fork(execution_id, self._env, self._provider, self._mcp)
            self._children[execution_id] = _Child(pid, channel)
        log.info("fork server: execution %s runs as pid %d", execution_id, pid)
        return _handle(execution_id, pid)

    def status(self, handle: Handle) -> SubstrateStatus:
        child = self._child(handle)
        return SubstrateStatus.UNKNOWN if child is None else self._poll(child, 0.0)

    def wait(self, handle: Handle, timeout: float) -> SubstrateStatus:
        child = self._child(handle)
        return SubstrateStatus.UNKNOWN if child is None else self._poll(child, timeout)

    def cancel(self, handle: Handle) -> None:
        """SIGTERM to the group, then SIGKILL to the group and every process it had started."""
        child = self._child(handle)
        if child is None:
            return
        below = descendants(child.pid)
        if self._poll(child, 0.0) is SubstrateStatus.RUNNING:
            _kill_group(child.pid, signal.SIGTERM)
            if self._poll(child, self._grace) is SubstrateStatus.RUNNING:
                log.warning("fork server: pid %d ignored SIGTERM, killing", child.pid)
                _kill_group(child.pid, signal.SIGKILL)
        for pid in below:
            _kill_group(pid, signal.SIGKILL, whole_group=False)
        self._poll(child, REPLY_TIMEOUT_S)

    def _child(self, handle: Handle) -> _Child | None:
        with self._lock:
            child = self._children.get(handle.execution_id)
        return child if child is not None and str(child.pid) == handle.ref else None

    def _poll(self, child: _Child, timeout: float) -> SubstrateStatus:
        if child.code is None:
            deadline = time.monotonic() + max(timeout, 0.0)
            try:
                child.channel.settimeout(max(deadline - time.monotonic(), 0.0))
                child.code = int(json.loads(_read_line(child.channel, child.buffer))["exit"])
            except (TimeoutError, BlockingIOError):
                return SubstrateStatus.RUNNING
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.warning("fork server: no exit status for pid %d (%s)", child.pid,
                            type(exc).__name__)
                child.code = -int(signal.SIGKILL)  # the server is gone: so is the child
            child.channel.close()
            if child.code != 0:
                log.info("fork server: pid %d exited with %d", child.pid, child.code)
        return SubstrateStatus.SUCCEEDED if child.code == 0 else SubstrateStatus.FAILED


def _handle(execution_id: str, pid: int) -> Handle:
    return Handle(substrate="local", execution_id=execution_id, ref=str(pid))


def _read_line(channel: socket.socket, buffer: bytearray) -> bytes:
    """One newline-terminated message (``buffer`` keeps a partial one across timeouts)."""
    while b"\n" not in buffer:
        chunk = channel.recv(4096)
        if not chunk:
            raise ValueError("the fork server closed the channel")
        buffer.extend(chunk)
    line, _, rest = bytes(buffer).partition(b"\n")
    buffer[:] = rest
    return line
