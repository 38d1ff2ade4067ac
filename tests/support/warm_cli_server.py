"""The warm CLI launcher's zygote (``python -m tests.support.warm_cli_server FD TITLE_ROOM``).

Started by :mod:`tests.support.warm_cli` (one per pytest process, on its first ``studio`` command),
never by hand. It imports what the ``studio`` commands of the suite import (:data:`WARM_MODULES`),
collects and freezes that heap (:func:`gc.freeze`), says ``ready`` on its control socket (a
private ``SOCK_SEQPACKET`` pair with the pytest process: no path anyone else can connect) and then
only forks: one child per request. It is not a fake: the child runs the real
``services.cli`` code, exactly as ``python -m services.cli ARGS`` would after its imports.

A request is one message on the control socket carrying four descriptors (``SCM_RIGHTS``): the
request's own stream socket, then the child's stdin, stdout and stderr. This process forks at
once and answers ``{"pid": PID}`` on the request socket; it never reads the request itself (so the
environment a test gives, secrets included, never sits in the memory every later child is forked
from). The child (:func:`_become`) reads the request from that socket (argv, environment, cwd,
``setsid``), resets its signal handlers, closes every descriptor of this process, makes the three
given descriptors its 0/1/2, replaces ``os.environ`` entirely with the request's, changes
directory, writes the argv over its command line (``/proc/self/cmdline``, in the room the last
argument of this process left), forgets what depends on the environment (the settings cache,
``tempfile``'s directory) and then runs ``services.cli`` as ``python -m`` does
(:func:`runpy._run_module_as_main`), from :func:`main`: the command's ``SystemExit`` (or
exception, or signal) ends the child the way it ends a fresh interpreter, through the
interpreter's own finalization (non-daemon threads joined, ``atexit`` handlers run, stdio
flushed), since this module's last line is ``raise SystemExit(main(...))``.

This process reaps its children (:func:`os.wait4`) and sends each one's exit status
(:func:`os.waitstatus_to_exitcode`: negative for a signal) with its CPU time on the request
socket. It holds no settings, no database, no thread, no secret; it exits when the control socket
closes (the pytest process ended) and has ``PR_SET_PDEATHSIG`` towards the pytest process.

What the warm-up reads from the environment is recorded (:class:`_RecordingEnviron`) and sent
with ``ready``: the client forks only a request whose environment agrees with this process's on
each of those names and on the interpreter's own (``PYTHON*``, locale, ``TZ``), and starts a fresh
interpreter for any other.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import os
import runpy
import selectors
import signal
import site
import socket
import struct
import sys
import sysconfig
import tempfile
import threading
import traceback
import types
import warnings
from types import TracebackType
from typing import Any

from services.cli.fork_child import close_all_but, read_exactly, retitle

# What the ``studio`` commands the suite runs import: the entry point and every command module,
# the ORM and its models, the API server (FastAPI, uvicorn), the worker (Celery), the engine and
# the model SDK (``run``, ``execute``, ``eval``). Measured with ``-X importtime``: about 1 CPU-s of
# imports; each child finds them loaded (docs/sphinx/testing.rst, "The warm CLI launcher").
WARM_MODULES: tuple[str, ...] = (
    "services.cli.main",
    "services.cli.lazy_group",
    "services.cli.help_page",
    "services.cli.config_errors",
    "services.settings",
    "services.logs",
    "typer._adapters",
    "typer._click.decorators",
    "rich._emoji_codes",
    "services.cli.run",
    "services.cli.execute",
    "services.cli.executions",
    "services.cli.evals",
    "services.cli.triggers",
    "services.cli.tokens",
    "services.cli.integrations",
    "services.cli.runtime_settings",
    "services.cli.teams",
    "services.cli.tools",
    "services.cli.mcp",
    "services.cli.db",
    "services.cli.review",
    "services.cli.providers",
    "services.cli.demo",
    "services.cli.api",
    "services.cli.worker",
    "services.cli.database",
    "services.cli.live",
    "services.cli.telemetry",
    "services.db.executions",
    "services.db.session",
    "services.runs.service",
    "services.telemetry.tracing",
    "services.execution.providers.profiles",
    "services.execution.providers.replay",
)
# Imported too when present; one that fails to import is left to the child, which fails with
# its own error where it imports it.
OPTIONAL_MODULES: tuple[str, ...] = (
    "services.api.app",  # studio api: FastAPI, the routers
    "uvicorn",
    "services.worker.runner",  # studio worker: Celery
    "services.execution.providers.codex",  # studio run/execute/eval: the OpenAI SDK
    "httpcore2",
    "anyio._backends._asyncio",
)
# what a child runs with ``-m``: the CLI, and the launcher's probe (its tests)
FORKABLE_MODULES = ("services.cli", "tests.support.warm_cli_probe")
RUNPY_FILE = runpy._run_code.__code__.co_filename  # type: ignore[attr-defined]
LENGTH = struct.Struct("!I")
PR_SET_PDEATHSIG = 1
MAX_REQUEST = 16 << 20
REQUEST_FDS = 4  # the request socket, stdin, stdout, stderr


class _RecordingEnviron(os._Environ):  # type: ignore[type-arg]
    """``os.environ`` over the same variables, noting each name read (``*``: all of them)."""

    def __init__(self, real: Any, names: set[str]) -> None:
        super().__init__(real._data, real.encodekey, real.decodekey, real.encodevalue,
                         real.decodevalue)
        self.names = names

    def __getitem__(self, key: str) -> str:
        self.names.add(key)
        return str(super().__getitem__(key))

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.names.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Any:
        self.names.add("*")
        return super().__iter__()

    def copy(self) -> dict[str, str]:
        self.names.add("*")
        return dict(super().items())


def warm_up() -> tuple[list[str], list[str]]:
    """Import :data:`WARM_MODULES` (and what of :data:`OPTIONAL_MODULES` imports); the names of
    the environment variables read meanwhile, sorted, and the warnings the imports gave that
    the default filters show (a fresh interpreter would print them: there must be none)."""
    names: set[str] = set()
    real = os.environ
    os.environ = _RecordingEnviron(real, names)  # noqa: B003 - the same variables, noted
    try:
        with warnings.catch_warnings(record=True) as caught:
            _import_all()
    finally:
        os.environ = real  # noqa: B003 - the object every module saw before
    return sorted(names), [f"{w.category.__name__}: {w.message}" for w in caught]


def _import_all() -> None:
    for name in WARM_MODULES:
        importlib.import_module(name)
    for name in OPTIONAL_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the child imports it again and reports it
            traceback.print_exc()


def main(argv: list[str]) -> None:
    """Warm up, say ``ready`` (with the variables read), serve; return only in a child, after
    running the command (whose ``SystemExit`` normally propagates from here)."""
    control = socket.socket(fileno=int(argv[0]))
    parent = os.getppid()
    if len(argv) > 2 and argv[2] == "pdeathsig":
        ctypes.CDLL(None, use_errno=True).prctl(
            ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
            ctypes.c_ulong(0), ctypes.c_ulong(0))
        if os.getppid() != parent:
            return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for pytest: we follow it
    names, shown = warm_up()
    threads = threading.active_count()
    settings_calls = _settings_calls()
    # what the imports made stays out of the children's collections (a collection writes into
    # every object it visits, which would copy each page of it into each child)
    gc.collect()
    gc.freeze()
    control.send(json.dumps({"ready": threads == 1 and not settings_calls, "read": names,
                             "threads": threads, "settings_calls": settings_calls,
                             "warnings": shown,
                             "modules": len(sys.modules), "home_free": not site.ENABLE_USER_SITE,
                             "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd"))}
                            ).encode())
    if threads != 1 or settings_calls:
        return
    for stream in (sys.stdout, sys.stderr):  # nothing of ours left in a buffer a child inherits
        stream.flush()
    request = serve(control)
    if request is not None:
        run_command(request)


def _settings_calls() -> int:
    """How often the warm-up called :func:`~services.settings.get_settings`: it must not (the
    settings carry secrets, and are each child's own)."""
    from services.settings import get_settings

    info = get_settings.cache_info()
    return info.hits + info.misses + info.currsize


def serve(control: socket.socket) -> dict[str, Any] | None:
    """Fork one child per request until the control socket closes (then ``None``); in a child,
    the request it is to run."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    channels: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ, "control")
    selector.register(read_end, selectors.EVENT_READ, "child")
    server_pid = os.getpid()
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "child":
                    os.read(read_end, 4096)
                    continue
                try:
                    message, fds, flags, _ = socket.recv_fds(control, 4096, REQUEST_FDS)
                except OSError:
                    message, fds, flags = b"", [], 0
                if not message:  # pytest closed it (or died): stop
                    for fd in fds:
                        os.close(fd)
                    return None
                if len(fds) != REQUEST_FDS or flags & (socket.MSG_CTRUNC | socket.MSG_TRUNC):
                    for fd in fds:
                        os.close(fd)
                    continue
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    channel = socket.socket(fileno=fds[0])
                    for other in channels.values():
                        other.close()
                    channels.clear()
                    control.close()
                    os.close(read_end)
                    os.close(write_end)
                    try:
                        return _become(channel, fds[1:])
                    except BaseException as exc:  # noqa: BLE001 - not started: say so, end
                        with contextlib.suppress(OSError):
                            channel.sendall(json.dumps({"error": repr(exc)}).encode() + b"\n")
                        os._exit(127)
                for fd in fds[1:]:
                    os.close(fd)
                channel = socket.socket(fileno=fds[0])
                channels[pid] = channel
                with contextlib.suppress(OSError):
                    channel.sendall(json.dumps({"pid": pid}).encode() + b"\n")
            _reap(channels)
    finally:
        if os.getpid() == server_pid:
            selector.close()


def _reap(channels: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel = channels.pop(pid, None)
        if channel is None:
            continue
        with contextlib.suppress(OSError):
            channel.sendall(json.dumps({
                "status": status, "exit": os.waitstatus_to_exitcode(status),
                "utime": usage.ru_utime,
                "stime": usage.ru_stime}).encode() + b"\n")
        channel.close()


def _become(channel: socket.socket, stdio: list[int]) -> dict[str, Any]:
    """In the forked child: read the request and become its process (but for the command);
    say ``started`` on the request socket once done (the client returns from ``Popen`` then,
    as :class:`subprocess.Popen` does once its child has exec'ed)."""
    signal.set_wakeup_fd(-1)
    for number in signal.valid_signals():
        with contextlib.suppress(OSError, ValueError):
            handler = signal.getsignal(number)
            if number == signal.SIGINT:
                signal.signal(number, signal.default_int_handler)
            elif number in (signal.SIGCHLD,) or callable(handler):
                signal.signal(number, signal.SIG_DFL)
    request = _read_request(channel)
    if request.get("setsid"):
        os.setsid()
    elif request.get("process_group") is not None:
        os.setpgid(0, int(request["process_group"]))
    for target, fd in enumerate(stdio):
        os.dup2(fd, target, inheritable=True)
    for fd in stdio:
        if fd > 2 and fd != channel.fileno():
            with contextlib.suppress(OSError):
                os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    cwd = request.get("cwd")
    if cwd:
        os.chdir(cwd)
    argv = [str(part) for part in request["argv"]]
    retitle(argv, trim=True)
    if os.isatty(1):  # as a fresh interpreter's stdout on a terminal
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    channel.sendall(json.dumps({"started": True}).encode() + b"\n")
    channel.close()
    close_all_but((0, 1, 2))
    return request


def _read_request(channel: socket.socket) -> dict[str, Any]:
    channel.settimeout(60.0)
    header = read_exactly(channel, LENGTH.size, "the client closed the request")
    (size,) = LENGTH.unpack(header)
    if size > MAX_REQUEST:
        raise ValueError("request too large")
    closed = "the client closed the request"
    request: dict[str, Any] = json.loads(read_exactly(channel, size, closed))
    return request


def forget_environment() -> None:
    """Drop what the warm-up derived from this server's environment and a fresh interpreter
    derives from its own: ``tempfile``'s directory (``TMPDIR``), ``sysconfig``'s variables
    (the user base under ``HOME``, read on the way by ``zoneinfo``), ``site``'s user
    directories (``None`` in a virtual environment, as at a fresh start there; outside one the
    client compares ``HOME`` itself)."""
    tempfile.tempdir = None
    sysconfig._CONFIG_VARS = None  # type: ignore[attr-defined]
    if hasattr(sysconfig, "_CONFIG_VARS_INITIALIZED"):  # Python 3.12 and later
        sysconfig._CONFIG_VARS_INITIALIZED = False
    if not site.ENABLE_USER_SITE:
        site.USER_BASE = None
        site.USER_SITE = None


def run_command(request: dict[str, Any]) -> None:
    """Run the command in this process as the interpreter would have: ``python -m
    services.cli ARGS`` as ``-m`` does (:func:`runpy._run_module_as_main`), the ``studio``
    console script (``"script"``: its path) as a script (:func:`runpy.run_path` as
    ``__main__``, its directory first on ``sys.path``). The caches that depend on the
    environment are emptied first (the server filled none; this clears them all the same)."""
    from services.settings import get_settings

    get_settings.cache_clear()
    forget_environment()
    argv = [str(part) for part in request["argv"]]
    script = request.get("script")
    module = argv[2] if script is None and len(argv) > 2 else None
    if script is None and module not in FORKABLE_MODULES:
        raise SystemExit(f"warm CLI: not a command it runs: {argv[:3]}")
    sys.orig_argv = argv
    del request
    # a __main__ of its own, as at a fresh start (this module's functions keep their globals)
    sys.modules["__main__"] = types.ModuleType("__main__")
    from_the_command = _from_the_command
    try:
        if isinstance(script, str):
            sys.argv = argv[1:]
            sys.path[0] = os.path.dirname(script)
            runpy.run_path(script, run_name="__main__")
        else:
            sys.argv = ["-m", *argv[3:]]  # runpy puts the module's file there, as -m does
            sys.path[0] = os.getcwd()
            runpy._run_module_as_main(module)  # type: ignore[attr-defined]
    except (SystemExit, KeyboardInterrupt):
        raise  # the interpreter's own: the exit code, or SIGINT once finalized
    except BaseException as exc:  # noqa: BLE001 - uncaught: what the interpreter does with it
        trimmed = from_the_command(exc.__traceback__, script=isinstance(script, str))
        exc.__traceback__ = trimmed  # what the hook prints (the interpreter's prints that)
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, trimmed
        sys.excepthook(type(exc), exc, trimmed)
        raise SystemExit(1) from None


def _from_the_command(tb: TracebackType | None, *, script: bool) -> TracebackType | None:
    """``tb`` (caught in :func:`run_command`) from where a fresh interpreter's starts: runpy's
    ``-m`` frames, or the script's own first frame; without this server's frames above."""
    found = tb.tb_next if tb is not None else None
    while script and found is not None and found.tb_frame.f_code.co_filename == RUNPY_FILE:
        found = found.tb_next
    return found


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))  # type: ignore[func-returns-value]
