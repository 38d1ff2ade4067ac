"""The warm CLI launcher: ``python -m services.cli ARGS`` forked from a warm interpreter.

Not a fake. The process a test starts with :func:`run` or :class:`Popen` runs the real
``services.cli`` code, with the test's argv, environment, working directory and stdin/stdout/
stderr, its own pid, process group (``start_new_session``), signals and exit status; only its
imports were done before it existed. Most of what a ``studio`` command costs to start is
importing Python modules (about 1 CPU-s of ``studio run``, ``studio api``, ``studio worker``;
0.5-1 CPU-s of a short database command), and the suite starts hundreds of them: here a zygote
(:mod:`tests.support.warm_cli_server`), one per pytest process (each xdist worker), started on the
first command and living as long as that process, imports them once, and each command is a child
it forks (docs/sphinx/testing.rst, "The warm CLI launcher").

:func:`run` is :func:`subprocess.run` and :class:`Popen` is :class:`subprocess.Popen` (a subclass:
pipes, ``text``, ``communicate``, timeouts, ``terminate``/``kill``/``send_signal``, the context
manager are the standard library's own); only the start of the child and the wait for its exit
status differ, and only for a command line ``[sys.executable, "-m", "services.cli", ...]`` without
the options a fork cannot honour (``preexec_fn``, ``pass_fds``, ``user``...). Everything else, and
every command when:

* ``STUDIO_TEST_WARM_CLI=0`` is set,
* the zygote does not start or cannot be reached,
* the request's environment differs from the zygote's on a variable the interpreter reads as it
  starts (``PYTHON*``, locale, ``TZ``) or one the zygote's imports read (it reports them),
* the command line does not fit in the room the zygote's own left for it in ``/proc/<pid>/cmdline``,

is a fresh interpreter, exactly as before (:func:`subprocess.run`, :class:`subprocess.Popen`).

The exit status comes from the zygote (it is the child's parent, and reaps it), with the child's
CPU time: :func:`children_cpu` adds it up, for ``STUDIO_TEST_TIMINGS`` (:mod:`tests.timings`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

SWITCH = "STUDIO_TEST_WARM_CLI"
SERVER_MODULE = "tests.support.warm_cli_server"
CLI_PREFIX = (sys.executable, "-m", "services.cli")
# what the zygote runs with ``-m``: the CLI, and the launcher's probe (its own tests)
FORKABLE_MODULES = ("services.cli", "tests.support.warm_cli_probe")
# the virtual environment's ``studio`` console script (run by this interpreter: its shebang)
CONSOLE_SCRIPT = str(Path(sys.executable).with_name("studio"))
PROJECT_ROOT = Path(__file__).resolve().parents[2]
# the zygote's last argument: the room a child writes its command line into (/proc/<pid>/cmdline)
TITLE_ROOM = "." * 8192
START_TIMEOUT_S = 180.0
REPLY_TIMEOUT_S = 60.0
LENGTH = struct.Struct("!I")
# What the interpreter itself reads as it starts: a request that differs from the zygote on one
# of them gets a fresh interpreter.
# (the dynamic loader's and libc's, OpenSSL's configuration: read by C code, not os.environ)
INTERPRETER_VARIABLES = re.compile(
    r"PYTHON.*|LANG|LANGUAGE|LC_.*|TZ|LD_.*|GLIBC_TUNABLES|MALLOC_.*|OPENSSL_.*")
# What the zygote's own environment leaves out (as the tests' studio environments do): nothing
# that configures studio or a provider, no secret.
NOT_INHERITED = ("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "AWS_", "AZURE_")

_lock = threading.Lock()
_zygote: Zygote | None = None
_zygote_pid_owner = 0  # the pytest process the zygote belongs to (a forked test process has none)
_children_cpu = 0.0
_cpu_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Fresh interpreters for every command started inside (``STUDIO_TEST_WARM_CLI=0`` for the
    while): the browser page modules use it for their ``studio api`` and worker, see
    docs/sphinx/testing.rst, "The warm CLI launcher"."""
    before = os.environ.get(SWITCH)
    os.environ[SWITCH] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SWITCH, None)
        else:
            os.environ[SWITCH] = before


def children_cpu() -> float:
    """User plus system CPU seconds of the warm children reaped so far (by the zygote)."""
    return _children_cpu


def _add_cpu(seconds: float) -> None:
    global _children_cpu
    with _cpu_lock:
        _children_cpu += seconds


class Zygote:
    """The zygote process of this pytest process and the control socket to it."""

    def __init__(self, process: subprocess.Popen[bytes], control: socket.socket,
                 ready: dict[str, Any], environment: dict[str, str], room: int,
                 log: Path) -> None:
        self.process = process
        self.log = log
        self.control = control
        self.ready = ready
        self.environment = environment
        self.room = room
        self.send_lock = threading.Lock()
        # the variables whose value the zygote's imports kept (HOME: only outside a virtual
        # environment, where it decides the user site directory; the rest of what HOME gave
        # the warm-up, sysconfig's user base, each child derives again)
        self.read = {str(name) for name in ready.get("read", [])}
        if ready.get("home_free"):
            self.read.discard("HOME")

    @classmethod
    def start(cls) -> Zygote | None:
        """Start a zygote and wait until it is ready; ``None`` when it did not start."""
        environment = {name: value for name, value in os.environ.items()
                       if not name.startswith(NOT_INHERITED) and name != SWITCH}
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # PR_SET_PDEATHSIG follows the thread that started the zygote: only the main thread
        # lives as long as the process (otherwise the control socket's end is what stops it)
        death = "pdeathsig" if threading.current_thread() is threading.main_thread() else "-"
        argv = [sys.executable, "-m", SERVER_MODULE, str(theirs.fileno()), TITLE_ROOM, death]
        log = Path(tempfile.gettempdir()) / f"warm-cli-{os.getpid()}.log"
        try:
            with log.open("ab") as errors:
                process = subprocess.Popen(argv, cwd=PROJECT_ROOT, env=environment,
                                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                           stderr=errors, pass_fds=(theirs.fileno(),))
        except OSError:
            ours.close()
            return None
        finally:
            theirs.close()
        ours.settimeout(START_TIMEOUT_S)
        try:
            ready = json.loads(ours.recv(1 << 20) or b"{}")
        except (OSError, ValueError):
            ready = {}
        ours.settimeout(None)
        if not ready.get("ready"):
            ours.close()
            with contextlib.suppress(OSError):
                process.kill()
            process.wait()
            return None
        room = len(b"\0".join(os.fsencode(part) for part in argv)) + 1
        return cls(process, ours, ready, environment, room, log)

    def accepts(self, argv: Sequence[str], environment: Mapping[str, str]) -> bool:
        """Whether a child of this zygote is what a fresh interpreter would be for this
        request: the same start-up variables, and a command line that fits its room."""
        if "*" in self.read:
            return False
        for name in {*self.environment, *environment, *self.read}:
            if (INTERPRETER_VARIABLES.fullmatch(name) or name in self.read) and \
                    self.environment.get(name) != environment.get(name):
                return False
        title = b"\0".join(os.fsencode(part) for part in argv) + b"\0"
        return len(title) <= self.room

    def fork(self, request: dict[str, Any], stdio: tuple[int, int, int]) -> tuple[int, _Channel]:
        """Have the zygote fork a child for ``request`` with ``stdio`` as its 0/1/2; its pid
        and the channel its exit status comes on, once it has set itself up."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with self.send_lock:
                socket.send_fds(self.control, [b"fork"], [theirs.fileno(), *stdio])
            theirs.close()
            channel = _Channel(ours)
            pid = int(channel.message(REPLY_TIMEOUT_S)["pid"])
            payload = json.dumps(request).encode()
            ours.sendall(LENGTH.pack(len(payload)) + payload)
            started = channel.message(REPLY_TIMEOUT_S)
            if not started.get("started"):
                raise OSError(f"the warm child did not start: {started}")
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            theirs.close()
            ours.close()
            raise
        return pid, channel

    def stop(self) -> None:
        """Close the control socket (the zygote exits; its children run on) and reap it."""
        with contextlib.suppress(OSError):
            self.control.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(OSError):
            if self.log.stat().st_size == 0:
                self.log.unlink()


class _Channel:
    """The request's socket: newline-terminated JSON messages from the zygote and the child."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def message(self, timeout: float | None) -> dict[str, Any]:
        """The next message; :class:`TimeoutError` when none came within ``timeout`` (``0``:
        none there yet), :class:`EOFError` when the socket closed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except BlockingIOError as exc:
                raise TimeoutError from exc
            if not chunk:
                raise EOFError("the warm CLI zygote closed the channel")
            self.buffer.extend(chunk)
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer[:] = rest
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        self.sock.close()


def zygote() -> Zygote | None:
    """This process's zygote, started on first use; ``None`` when it is switched off or did
    not start (then every command is a fresh interpreter)."""
    global _zygote, _zygote_pid_owner
    if not enabled():
        return None
    with _lock:
        if _zygote_pid_owner != os.getpid():
            _zygote, _zygote_pid_owner = None, os.getpid()
            _zygote = Zygote.start()
            if _zygote is not None:
                atexit.register(_stop, _zygote)
        if _zygote is not None and _zygote.process.poll() is not None:
            _zygote = None  # it died: fresh interpreters from now on
        return _zygote


def _stop(zygote: Zygote) -> None:
    zygote.stop()


def _forkable(args: Any, executable: object, preexec_fn: object, pass_fds: Sequence[int],
              shell: bool, gid: object, gids: object, uid: object, umask: int) -> bool:
    """Whether ``args`` is a ``studio`` command line started with nothing a fork cannot
    honour: ``[sys.executable, "-m", "services.cli", ...]`` (or the probe's module) or
    ``[CONSOLE_SCRIPT, ...]``."""
    if not isinstance(args, (list, tuple)) or not args or \
            not all(isinstance(part, str) for part in args):
        return False
    module = len(args) >= 3 and args[0] == sys.executable and args[1] == "-m" and \
        args[2] in FORKABLE_MODULES
    if not module and _script(args[0]) is None:
        return False
    return (executable is None and preexec_fn is None and not pass_fds and not shell
            and gid is None and gids is None and uid is None and umask < 0)


def _script(program: str) -> str | None:
    """``program`` when it is the ``studio`` console script of this interpreter (its shebang
    names it), else ``None``."""
    if program != CONSOLE_SCRIPT:
        return None
    try:
        with open(program, "rb") as handle:
            first = handle.readline(4096)
    except OSError:
        return None
    interpreter = first[2:].strip().decode(errors="replace") if first.startswith(b"#!") else ""
    return program if interpreter == sys.executable else None


class Popen(subprocess.Popen):  # type: ignore[type-arg]
    """:class:`subprocess.Popen`, whose ``studio`` child is forked by the zygote."""

    _warm: _Channel | None = None  # the channel its exit status comes on, until it came
    forked = False  # whether the zygote forked it (rather than a fresh interpreter exec'ed)

    def _execute_child(self, args: Any, executable: Any, preexec_fn: Any, close_fds: bool,
                       pass_fds: Sequence[int], cwd: Any, env: Any, startupinfo: Any,
                       creationflags: int, shell: bool, p2cread: int, p2cwrite: int,
                       c2pread: int, c2pwrite: int, errread: int, errwrite: int,
                       restore_signals: bool, gid: Any, gids: Any, uid: Any, umask: int,
                       start_new_session: bool, process_group: int | None) -> None:
        started = False
        if _forkable(args, executable, preexec_fn, pass_fds, shell, gid, gids, uid, umask):
            started = self._fork(list(args), cwd, env, (p2cread, c2pwrite, errwrite),
                                 start_new_session, process_group)
        if started:
            self._close_pipe_fds(  # type: ignore[attr-defined]
                p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
            return
        super()._execute_child(  # type: ignore[misc]
            args, executable, preexec_fn, close_fds, pass_fds, cwd, env, startupinfo,
            creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite,
            restore_signals, gid, gids, uid, umask, start_new_session, process_group)

    def _fork(self, argv: list[str], cwd: Any, env: Mapping[str, str] | None,
              stdio: tuple[int, int, int], start_new_session: bool,
              process_group: int | None) -> bool:
        """Start the child in the zygote; ``False`` (and nothing started) when it cannot."""
        server = zygote()
        environment = dict(os.environ if env is None else env)
        directory = os.getcwd() if cwd is None else os.fsdecode(cwd)
        if server is None or not os.path.isdir(directory):
            return False
        script = _script(argv[0])
        title = argv if script is None else [sys.executable, *argv]  # what exec'ing it shows
        if not server.accepts(title, environment):
            return False
        request = {"argv": title, "script": script, "env": environment,
                   "cwd": os.path.abspath(directory),
                   "setsid": bool(start_new_session),
                   "process_group": None if process_group is None or process_group < 0
                   else process_group}
        fds = (stdio[0] if stdio[0] != -1 else 0, stdio[1] if stdio[1] != -1 else 1,
               stdio[2] if stdio[2] != -1 else 2)
        try:
            pid, channel = server.fork(request, fds)
        except (OSError, ValueError, KeyError, TypeError, EOFError):
            return False
        self.pid = pid
        self._warm = channel
        self._child_created = True
        self.forked = True
        return True

    def _try_wait(self, wait_flags: int) -> tuple[int, int]:
        """(callers hold ``_waitpid_lock``) ``(pid, wait status)``, ``(0, 0)`` while running."""
        channel = self._warm
        if channel is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc,no-any-return]
        try:
            message = channel.message(0.0 if wait_flags & os.WNOHANG else None)
        except TimeoutError:
            return 0, 0
        except (OSError, ValueError, EOFError):  # the zygote is gone: so is what it knew
            channel.close()
            self._warm = None
            return self.pid, int(signal.SIGKILL)
        channel.close()
        self._warm = None
        _add_cpu(float(message.get("utime", 0.0)) + float(message.get("stime", 0.0)))
        return self.pid, int(message["status"])

    def _internal_poll(self, _deadstate: int | None = None, _waitpid: Any = os.waitpid,
                       _WNOHANG: int = os.WNOHANG, _ECHILD: int = 10) -> int | None:
        if self._warm is None:
            return super()._internal_poll(  # type: ignore[misc,no-any-return]
                _deadstate=_deadstate)
        if self.returncode is None:
            if not self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
                return None
            try:
                if self.returncode is None:
                    pid, status = self._try_wait(_WNOHANG)
                    if pid == self.pid:
                        self._handle_exitstatus(status)  # type: ignore[attr-defined]
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode


def run(*popenargs: Any, input: Any = None, capture_output: bool = False,
        timeout: float | None = None, check: bool = False,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """:func:`subprocess.run`, with :class:`Popen`: the same arguments, result and errors
    (``TimeoutExpired`` after killing the child, ``CalledProcessError`` with ``check``)."""
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used.")
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output.")
        kwargs["stdout"] = subprocess.PIPE
        kwargs["stderr"] = subprocess.PIPE
    with Popen(*popenargs, **kwargs) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
        if check and code:
            raise subprocess.CalledProcessError(code, process.args, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)
