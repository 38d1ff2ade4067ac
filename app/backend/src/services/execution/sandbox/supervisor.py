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

import contextlib
import ctypes
import errno
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys

PROTOCOL = 1
MAX_MESSAGE = 1024 * 1024
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
HOME = "/tmp/home"
PR_SET_DUMPABLE = 4
RUN = b'{"op": "run"}'


def _send(channel: socket.socket, message: dict[str, object]) -> None:
    channel.send(json.dumps(message).encode())


def _receive(channel: socket.socket) -> tuple[dict[str, object] | None, list[int]]:
    """One request and the descriptors sent with it; (None, []) at end of file."""
    fds: list[int] = []
    data, ancillary, _, _ = channel.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(16 * 4))
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % 4
            fds += list(memoryview(payload)[:usable].cast("i"))
    if not data:
        for fd in fds:
            os.close(fd)
        return None, []
    return json.loads(data), fds


def _read_all(fd: int) -> bytes:
    """Everything in the memory file ``fd`` (closed here)."""
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _start(argv: list[str], env: dict[str, str], cwd: str, out: int,
           err: int) -> subprocess.Popen[bytes] | int:
    """Start the command (``vfork``: no page-table copy of this interpreter); its exit status
    when it cannot be executed (after saying so on its stderr, as a shell would)."""
    try:
        return subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
            close_fds=True, start_new_session=True, restore_signals=True,
        )
    except OSError as exc:
        os.write(err, f"cannot execute: {exc.strerror or exc}\n".encode())
        return 127 if exc.errno == errno.ENOENT else 126


def _clear_namespace() -> None:
    """Kill every process but this one and reap them all (orphans are reparented to PID 1)."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(-1, signal.SIGKILL)
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def _mount_points() -> tuple[frozenset[str], frozenset[str]]:
    """The sandbox's mount points (the workspace may be bound beneath ``/tmp``) and every
    directory above one: those are kept when the scratch directories are emptied. (Commands
    cannot add any: no capability, and the seccomp filter refuses ``mount``.)"""
    points: set[str] = set()
    with open("/proc/self/mountinfo", "rb") as table:
        for line in table:
            # Field 5; the kernel writes space, tab, newline and backslash as octal escapes.
            raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]),
                         line.split()[4])
            points.add(os.fsdecode(raw))
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
    shutil.rmtree(path)


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
    with contextlib.suppress(OSError):  # not ours to change: listing it says if it matters
        os.chmod(directory, mode)
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


def _wait(channel: socket.socket, proc: subprocess.Popen[bytes]) -> tuple[int, bool]:
    """Wait for the command's end, killing it when asked; (status, whether the harness is
    still there)."""
    alive = True
    pidfd = os.pidfd_open(proc.pid)
    try:
        while True:
            ready, _, _ = select.select([pidfd, channel.fileno()], [], [])
            if pidfd in ready:
                return proc.wait(), alive
            message, extra = _receive(channel)
            for fd in extra:
                os.close(fd)
            if message is None:
                alive = False
                proc.kill()
            elif message.get("op") == "kill":
                proc.kill()
    finally:
        os.close(pidfd)


def _run(channel: socket.socket, request: dict[str, object], fds: list[int],
         mounts: tuple[frozenset[str], frozenset[str]]) -> bool:
    """Run one command to its end; False when the harness went away meanwhile."""
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    env = {str(k): str(v) for k, v in request["env"].items()}  # type: ignore[attr-defined]
    try:
        started = _start(argv, env, str(request["cwd"]), fds[0], fds[1])
    finally:
        for fd in fds:
            os.close(fd)
    status, alive = (started, True) if isinstance(started, int) else _wait(channel, started)
    _clear_namespace()
    if not alive:
        return False
    _reset_scratch(*mounts)
    _send(channel, {"op": "exited", "status": status})
    return True


def main(fd: int) -> None:
    if os.getpid() != 1:
        # kill(-1) outside a PID namespace of its own would reach every process of this uid.
        sys.exit("the supervisor runs only as PID 1 of its own PID namespace")
    os.set_inheritable(fd, False)
    channel = socket.socket(fileno=fd)
    # Non-dumpable: a command (same uid, no capabilities) cannot open /proc/1/fd, read
    # /proc/1/mem or take the channel with pidfd_getfd.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    # The kernel drops a signal sent to a namespace's init from inside unless init handles it:
    # no handler here (Python's own SIGINT one included), so a command cannot signal PID 1.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    mounts = _mount_points()
    _reset_scratch(*mounts)
    _send(channel, {"op": "ready", "protocol": PROTOCOL})
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
        if not _run(channel, json.loads(body), fds, mounts):
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
