"""The supervisor: PID 1 of an execution's long-lived sandbox, running one command at a time.

This file runs **inside** the sandbox, as a standalone script: the harness copies its text into
a memory file and starts ``python3 -I -S /proc/self/fd/N FD`` (the harness's own interpreter,
bound read-only in the sandbox; isolated mode, no ``site``), so it imports nothing but the
standard library and nothing of ``services``. The harness imports it only to find its text and
:data:`MAX_MESSAGE`.

Control channel: the inherited end ``FD`` of a ``SOCK_SEQPACKET`` socket pair that the harness
made before starting the sandbox. It has no name anywhere in the sandbox's file system, it is
closed (close-on-exec, and explicitly) in every command's process, and the supervisor makes
itself non-dumpable, so a command cannot take it from ``/proc/1/fd`` or with ``pidfd_getfd``.
Messages are JSON, one per packet:

* harness -> supervisor: ``{"op": "run"}`` with three descriptors as ``SCM_RIGHTS``: the
  command's stdout and stderr (write ends of the harness's pipes) and a memory file holding
  ``{"argv", "env", "cwd"}`` (a packet is bounded by the socket's buffer, a command's arguments
  and environment are not); ``{"op": "kill"}`` (the deadline);
* supervisor -> harness: ``{"op": "ready"}`` once, then per command ``{"op": "exited",
  "status": N}`` (a negative status is the signal that ended it), sent only once every other
  process of the namespace is dead and the scratch directories are empty again.

The command runs in a new session with its stdin on ``/dev/null``. When it ends (or is killed at
the deadline), the supervisor sends ``SIGKILL`` to every other process of the PID namespace
(``kill(-1)`` from PID 1 spares only PID 1), reaps them, and empties ``/tmp``, ``/var/tmp`` and
``/dev/shm``: the next command finds what a fresh sandbox would. If the harness goes away (the
socket reaches end of file) or anything unexpected happens, the supervisor exits, and with PID 1
gone the kernel kills whatever is left in the namespace.
"""

from __future__ import annotations

import _json
import _socket
import ctypes
import errno
import os
import select
import sys

# The C modules under ``signal`` and ``socket`` rather than those (and no ``json``, ``re``,
# ``subprocess``, ``shutil``, ``contextlib`` or ``typing``): their imports (enums, regular
# expressions, threads) made this process 6.5 MB of PSS instead of 4.6 MB
# (``bench/sandbox_supervisor.py``), and one runs per running execution. mypy reads
# ``TYPE_CHECKING`` as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import signal as _signal
else:
    import _signal

PROTOCOL = 1
MAX_MESSAGE = 1024 * 1024
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
HOME = "/tmp/home"
PR_SET_DUMPABLE = 4
RUN = b'{"op": "run"}'


def _send(channel: _socket.socket, message: bytes) -> None:
    channel.send(message)


class _Decoding:
    """The options of ``json.loads`` (strict, no hooks) for ``_json``'s scanner."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"NaN": float("nan"), "Infinity": float("inf"),
                      "-Infinity": float("-inf")}.__getitem__


_scan = _json.make_scanner(_Decoding)  # type: ignore[arg-type]  # a duck-typed context


def _loads(data: bytes) -> dict[str, object]:
    """A JSON object (what ``json.loads`` gives, for what the harness sends: ``json.dumps``)."""
    text = data.decode("utf-8").strip(" \t\n\r")
    try:
        value, end = _scan(text, 0)
    except StopIteration:
        raise ValueError("not JSON") from None
    if end != len(text) or not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value


def _receive(channel: _socket.socket) -> tuple[dict[str, object] | None, list[int]]:
    """One request and the descriptors sent with it; (None, []) at end of file."""
    fds: list[int] = []
    data, ancillary, _, _ = channel.recvmsg(MAX_MESSAGE, _socket.CMSG_SPACE(16 * 4))
    for level, kind, payload in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += list(memoryview(payload)[:usable].cast("i"))
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return _loads(data), fds


def _read_all(fd: int) -> bytes:
    """Everything in the memory file ``fd`` (closed here)."""
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class _NotExecuted(Exception):
    """The command could not be executed; ``status`` is what a shell would answer."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _start(argv: list[str], env: dict[str, str], cwd: str, out: int, err: int) -> int:
    """Start the command as ``subprocess.Popen`` did here (``close_fds``,
    ``start_new_session``, ``restore_signals``, stdin on ``/dev/null``, ``cwd``, the program
    looked up in ``env``'s ``PATH``, the first error other than "not found" reported); its pid.
    Raises :class:`_NotExecuted` when it cannot be executed, after saying so on its stderr as a
    shell would.

    ``posix_spawn`` (``vfork`` underneath, as ``Popen``: a ``fork`` of this interpreter cost
    2 ms more per command, measured); it has no ``cwd``, so this process changes its own
    directory for the spawn (single-threaded; every path it uses is absolute), and no
    ``close_fds``, so every descriptor above 2 is made close-on-exec first."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:  # noqa: SIM105 - no contextlib here (its imports, see above)
                os.set_inheritable(int(name), False)
            except OSError:  # the listing's own descriptor, closed since
                pass
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)]
    first: OSError | None = None
    try:
        os.chdir(cwd)
        for program in _candidates(argv[0], env):
            try:  # a file that is not there is not spawned (a spawn costs a process)
                os.stat(program)
                return os.posix_spawn(program, argv, env, file_actions=actions, setsid=True,
                                      setsigdef=(_signal.SIGPIPE, _signal.SIGXFSZ))
            except OSError as exc:
                if first is None or first.errno in (errno.ENOENT, errno.ENOTDIR):
                    first = exc
        raise first or FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
    except OSError as exc:
        os.write(err, f"cannot execute: {exc.strerror or exc}\n".encode(errors="replace"))
        raise _NotExecuted(127 if exc.errno == errno.ENOENT else 126) from None
    finally:
        os.chdir("/")


def _candidates(program: str, env: dict[str, str]) -> list[str]:
    """Where ``program`` is looked for: itself when it names a directory, else in each
    directory of ``env``'s ``PATH`` (``Popen`` with ``env``: ``os.get_exec_path(env)``)."""
    if os.path.dirname(program):
        return [program]
    return [os.path.join(directory, program) for directory in os.get_exec_path(env)]


def _clear_namespace() -> None:
    """Kill every process but this one and reap them all (orphans are reparented to PID 1)."""
    try:  # noqa: SIM105 - no contextlib here (its imports, see above)
        os.kill(-1, _signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _unescape(field: bytes) -> bytes:
    """A field of ``/proc/self/mountinfo``: the kernel writes space, tab, newline and
    backslash as a backslash and three octal digits."""
    head, *rest = field.split(b"\\")
    plain = bytearray(head)
    for part in rest:
        if len(part) >= 3 and all(0x30 <= digit <= 0x37 for digit in part[:3]):
            plain.append(int(part[:3], 8))
            plain += part[3:]
        else:
            plain += b"\\" + part
    return bytes(plain)


def _mount_points() -> tuple[frozenset[str], frozenset[str]]:
    """The sandbox's mount points (the workspace may be bound beneath ``/tmp``) and every
    directory above one: those are kept when the scratch directories are emptied. (Commands
    cannot add any: no capability, and the seccomp filter refuses ``mount``.)"""
    points: set[str] = set()
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            points.add(os.fsdecode(_unescape(line.split()[4])))  # field 5
    above: set[str] = set()
    for point in points:
        parent = os.path.dirname(point)
        while parent not in above and parent != "/":
            above.add(parent)
            parent = os.path.dirname(parent)
    return frozenset(points), frozenset(above)


def _remove(path: str, device: int) -> None:
    """Remove ``path`` whatever its modes (the owner may always make its directories usable),
    never touching another file system: a mount point found beneath it (the kernel named it in
    a way :func:`_mount_points` missed) stops the supervisor before anything is removed or
    changed there (the sandbox is then started again, and the journal says so)."""
    if not os.path.isdir(path) or os.path.islink(path):
        os.unlink(path)
        return
    _own_directory(path, device)
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            _own_directory(os.path.join(root, name), device)
    for root, dirs, files in os.walk(path, topdown=False):  # links are not followed
        for name in files:
            os.unlink(os.path.join(root, name))
        for name in dirs:
            full = os.path.join(root, name)
            if os.path.islink(full):
                os.unlink(full)
            else:
                os.rmdir(full)
    os.rmdir(path)


def _own_directory(path: str, device: int) -> None:
    """``path`` (a directory of the scratch file system) made usable by its owner."""
    status = os.lstat(path)
    if status.st_dev != device:
        sys.exit(f"a mount point at {path!r}: not removed")
    if not os.path.islink(path):
        os.chmod(path, 0o700)


def _empty(directory: str, points: frozenset[str], above: frozenset[str], mode: int) -> None:
    """Remove everything under ``directory`` except mount points and the way to them; its mode
    back to ``mode`` first (a command may have taken its own rights away)."""
    if not os.path.isdir(directory) or os.path.islink(directory):
        return
    try:  # noqa: SIM105 - no contextlib here
        os.chmod(directory, mode)
    except OSError:  # not ours to change: listing it says if it matters
        pass
    device = os.lstat(directory).st_dev
    for name in os.listdir(directory):
        full = os.path.join(directory, name)
        if full in points:
            continue
        if full in above:
            _empty(full, points, above, 0o755)
        else:
            _remove(full, device)


def _reset_scratch(points: frozenset[str], above: frozenset[str]) -> None:
    for directory in SCRATCH:
        _empty(directory, points, above, 0o1777)
    os.mkdir(HOME, 0o700)


def _wait(channel: _socket.socket, pid: int) -> tuple[int, bool]:
    """Wait for the command's end, killing it when asked; (status, whether the harness is
    still there). The status is negative for the signal that ended it."""
    alive = True
    pidfd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, channel.fileno()], [], [])
            if pidfd in ready:
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), alive
            message, extra = _receive(channel)
            for fd in extra:
                os.close(fd)
            if message is None:
                alive = False
                os.kill(pid, _signal.SIGKILL)  # not reaped yet: the pid is still its own
            elif message.get("op") == "kill":
                os.kill(pid, _signal.SIGKILL)
    finally:
        os.close(pidfd)


def _run(channel: _socket.socket, request: dict[str, object], fds: list[int],
         mounts: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Run one command to its end; False when the harness went away meanwhile."""
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
    try:
        pid = _start(argv, env, str(request["cwd"]), fds[0], fds[1])
    except _NotExecuted as failed:
        status, alive = failed.status, True
    else:
        status, alive = _wait(channel, pid)
    finally:
        for fd in fds:
            os.close(fd)
    _clear_namespace()
    if not alive:
        return False
    _reset_scratch(*mounts)
    _send(channel, b'{"op": "exited", "status": %d}' % status)
    return True


def main(fd: int) -> None:
    if os.getpid() != 1:
        # kill(-1) outside a PID namespace of its own would reach every process of this uid.
        sys.exit("the supervisor runs only as PID 1 of its own PID namespace")
    os.set_inheritable(fd, False)
    channel = _socket.socket(fileno=fd)
    # Non-dumpable: a command (same uid, no capabilities) cannot open /proc/1/fd, read
    # /proc/1/mem or take the channel with pidfd_getfd.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # The kernel drops a signal sent to a namespace's init from inside unless init handles it:
    # no handler here (Python's own SIGINT one included), so a command cannot signal PID 1.
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
    mounts = _mount_points()
    _reset_scratch(*mounts)
    _send(channel, b'{"op": "ready", "protocol": %d}' % PROTOCOL)
    while True:
        request, fds = _receive(channel)
        if request is None:
            return
        if request.get("op") == "kill" and not fds:
            continue  # sent at a deadline the command had just beaten: nothing to kill
        if request.get("op") != "run" or len(fds) != 3:
            for extra in fds:
                os.close(extra)
            return
        body = _read_all(fds.pop())
        if not _run(channel, _loads(body), fds, mounts):
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
