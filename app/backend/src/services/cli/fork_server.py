"""The worker's fork server (``python -m services.cli.fork_server FD PROVIDERS TITLE_ROOM``).

Started by ``studio worker`` (:class:`services.executors.forked.ForkServer`), never by hand. It
imports what every ``studio execute`` needs whatever its provider, and the adapter and SDK of
each provider ``PROVIDERS`` names (comma separated: the providers whose credentials the worker's
environment configures, :func:`~services.execution.providers.profiles.configured_providers`;
names only, checked against the profiles' ``ADAPTER_MODULES``, anything else ignored), says
``ready`` on its control socket, and then forks one child per request
(:mod:`services.executors.forked` describes the exchange). A request may name the execution's
provider, and say that it may start MCP servers: the first one that names a provider not
imported yet imports its adapter and SDK here, before the fork, and the first one with MCP the
MCP client (:func:`warm_for`), so that this child and every later one find them loaded. So a
deployment's own providers cost nothing at their first execution, and a worker whose
executions use no credentials (the test suite's replay runs) or no MCP server never imports the
others' SDKs or the MCP client. What it holds is shared by every child, so it holds nothing of
any one execution: no database connection, no thread, no event loop, no settings (they carry
secrets: each child reads its own), no secret (its environment has none, and ``PROVIDERS`` is
names; an execution's environment goes from the slot to the child, never through this
process). It exits when the control socket closes (the worker stopped or died; it
also has ``PR_SET_PDEATHSIG`` towards the worker) and its children die with it.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import traceback

from services.cli.fork_child import close_all_but, read_exactly, retitle

# Everything ``studio execute`` imports on its way whatever its provider (the CLI, the durable
# path, the database layer; its drivers: :func:`warm_up`): imported once here, not per execution.
# A provider's adapter and SDK (``ADAPTER_MODULES`` of its profile) come with the warm-up when the
# worker names the provider at the start (:func:`adapters`), else with the first request that
# names it; the MCP client with the first request that may start MCP servers (:func:`warm_for`).
WARM_MODULES: tuple[str, ...] = (
    "services.cli.main",
    "services.cli.execute",  # the command itself, and what running it loads
    # (a child runs the command without typer's command line, services.cli.main.execute_main:
    # typer's command building, typer._adapters and its rich help, 6 MB, is not preloaded)
    "rich._emoji_codes",
    "services.cli.database",
    "services.cli.live",
    "services.logs",  # each child configures its own logging (the module only, imported here)
    "services.cli.telemetry",
    "services.db.executions",
    "services.db.session",
    "services.runs.service",
    "services.runs.legacy_runtime",  # the service imports it for a legacy run only
    "services.telemetry.tracing",
    "services.execution.providers.profiles",
    "services.execution.providers.replay",
    # what the SDKs' HTTP clients load when the first one is made
    "httpcore2",
    "httpcore2._backends.anyio",
    "httpcore2._backends.trio",
    "anyio._backends._asyncio",
    "truststore",
    "concurrent.futures.thread",
)
MCP_MODULE = "services.execution.mcp.bridge"  # the MCP client (services.runs.loop imports it)
LENGTH = struct.Struct("!I")
PR_SET_PDEATHSIG = 1
MAX_ENVIRONMENT = 1 << 20


def warm_up() -> None:
    """Import the modules every execution needs, and compute what is the same for all of them
    and secret to none (the migration scripts' head revisions, the configured ORM mappers)."""
    for name in WARM_MODULES:
        importlib.import_module(name)
    from services.db import migrate, session
    from services.execution.tool_domains import registry
    from services.telemetry import metrics

    metrics.preload()
    registry.warm_schemas()
    session.preload_drivers()
    migrate.warm_script_heads()
    session.preload_mappers()


def adapters(names: str) -> list[str]:
    """The adapter modules of the providers ``names`` lists (comma separated), each once, in the
    order given; a name the profiles' ``ADAPTER_MODULES`` does not know is ignored."""
    from services.execution.providers.profiles import ADAPTER_MODULES

    modules = [ADAPTER_MODULES.get(name.strip()) for name in names.split(",")]
    return list(dict.fromkeys(module for module in modules if module is not None))


def load(modules: list[str]) -> None:
    """Import ``modules``; one that fails is left to the child, which fails again with its error
    where it imports it."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - the child imports it again and reports the error
            traceback.print_exc()


class Refused(Exception):
    """This server forks no more: an import made after ``ready`` started a thread."""


def warm_for(request: dict[str, object]) -> None:
    """Import what ``request`` says its execution needs and this server does not hold yet: the
    adapter (and with it the SDK) of the provider it names, the MCP client when ``mcp`` is
    true; then freeze what that allocated out of the garbage collector, as :func:`main` does
    for the warm-up. Only a name of the profiles' table is imported: anything else a request
    carries is ignored. An import that fails is left to the child, which fails again with its
    error where it imports the module. An import that started a thread makes this server refuse
    every request from then on (:class:`Refused`: the slots exec their children)."""
    from services.execution.providers.profiles import ADAPTER_MODULES

    provider = request.get("provider")
    wanted = [ADAPTER_MODULES.get(provider) if isinstance(provider, str) else None,
              MCP_MODULE if request.get("mcp") is True else None]
    missing = [module for module in wanted if module is not None and module not in sys.modules]
    if not missing:
        return
    load(missing)
    if threading.active_count() != 1:
        print(f"fork server: importing {', '.join(missing)} started a thread; refusing to "
              "serve", file=sys.stderr)
        raise Refused(missing[0])
    freeze_heap()


def freeze_heap() -> None:
    """Keep what this server holds out of its children's garbage collections (a collection
    writes into every object it visits, which would copy each page of it into each child), and
    say so to the loop (:func:`services.runs.loop.startup_heap_frozen`): a child's first loop
    then freezes its own setup without counting the frozen objects first."""
    from services.runs.loop import startup_heap_frozen

    gc.collect()
    gc.freeze()
    startup_heap_frozen()


def serve(control: socket.socket) -> None:
    """Answer fork requests until the control socket closes."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    channels: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(read_end, selectors.EVENT_READ, "child")
    server_pid = os.getpid()
    refused = False
    while True:
        for key, _ in selector.select():
            if key.data == "child":
                os.read(read_end, 4096)
                continue
            try:
                message, fds, flags, _ = socket.recv_fds(control, 4096, 2)
            except OSError:
                message, fds, flags = b"", [], 0
            if not message:  # the worker closed it (or died): stop, children die with us
                return
            if flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC) or refused:
                fds, message = [*fds, -1], b""  # more than a request holds, or we fork no more
            try:
                _fork_one(message, fds, channels, server_pid)
            except Refused:
                refused = True
        _reap(channels)


def _fork_one(message: bytes, fds: list[int], channels: dict[int, socket.socket],
              server_pid: int) -> None:
    if len(fds) != 1:  # a request hands exactly one socket: anything else is ignored
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        return
    channel = socket.socket(fileno=fds[0])
    try:
        request = json.loads(message)
        execution_id = str(request["execution_id"])
    except (ValueError, KeyError, TypeError):
        channel.close()
        return
    try:
        warm_for(request)
    except Refused:
        channel.close()
        raise
    pid = os.fork()
    if pid == 0:
        try:
            code = _child(channel, execution_id, server_pid)
        except BaseException:  # noqa: BLE001 - whatever happens, this process ends here
            traceback.print_exc()
            code = 1
        os._exit(code)
    with contextlib.suppress(OSError):
        os.setpgid(pid, pid)  # also done by the child: whichever runs first
    channels[pid] = channel
    with contextlib.suppress(OSError):  # the slot is gone: the child finds no environment
        channel.sendall(json.dumps({"pid": pid}).encode() + b"\n")


def _reap(channels: dict[int, socket.socket]) -> None:
    while channels:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel = channels.pop(pid, None)
        if channel is None:
            continue
        with contextlib.suppress(OSError):
            channel.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode()
                            + b"\n")
        channel.close()


def _child(channel: socket.socket, execution_id: str, server_pid: int) -> int:
    """The forked process: become ``studio execute <execution_id>`` with the slot's environment."""
    os.setpgid(0, 0)
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        print("fork server: prctl failed", file=sys.stderr)
        return 127
    if os.getppid() != server_pid:
        return 127  # the server is gone
    signal.set_wakeup_fd(-1)
    for number in (signal.SIGCHLD, signal.SIGINT):
        signal.signal(number, signal.default_int_handler if number == signal.SIGINT
                      else signal.SIG_DFL)
    close_all_but((0, 1, 2, channel.fileno()))
    environment = _read_environment(channel)
    channel.close()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # diagnostics to the worker's stderr, as for an exec'ed child
    os.environ.clear()
    os.environ.update(environment)
    retitle([sys.executable, "-m", "services.cli", "execute", execution_id])
    return _run_execute(execution_id)


def _read_environment(channel: socket.socket) -> dict[str, str]:
    channel.settimeout(30.0)
    header = read_exactly(channel, LENGTH.size, "the slot closed the channel")
    (size,) = LENGTH.unpack(header)
    if size > MAX_ENVIRONMENT:
        raise ValueError("environment too large")
    data = json.loads(read_exactly(channel, size, "the slot closed the channel"))
    environment = data["env"]
    if not isinstance(environment, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in environment.items()):
        raise ValueError("malformed environment")
    return environment


def _run_execute(execution_id: str) -> int:
    """``studio execute <execution_id>`` in this process, from a clean slate: the settings and
    logging are those of this environment (the server read neither)."""
    from services.cli.main import execute_main
    from services.settings import get_settings

    get_settings.cache_clear()
    code: int = 0
    try:
        execute_main(execution_id)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    return code


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[0]))
    warm_up()
    load(adapters(argv[1] if len(argv) > 2 else ""))  # the deployment's providers
    if threading.active_count() != 1:  # an import started a thread: it would not survive a fork
        print("fork server: an import started a thread; refusing to serve", file=sys.stderr)
        sys.exit(1)
    # what the imports made stays out of the children's garbage collections
    freeze_heap()
    control.send(b"ready")
    serve(control)


if __name__ == "__main__":
    main(sys.argv[1:])
