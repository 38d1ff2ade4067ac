"""One cgroup per sandboxed command, where the host lets the harness make one.

Supported layouts: cgroup v1 with the ``memory`` and ``pids`` hierarchies mounted under
``/sys/fs/cgroup/`` (this machine), and cgroup v2 (``/sys/fs/cgroup`` unified, a delegated
subtree as in a Kubernetes pod run as root). The group is made beneath the harness's own group in
each hierarchy, so the deployment's limits (the pod's) still hold above it.

:func:`cgroup_layout` finds, once per process, which hierarchies accept a new group; when none
does (a non-root container), commands get rlimits only (:mod:`~services.execution.sandbox.limits`).
A :class:`CommandGroup` is created before the command starts, joined by the child before its
program runs and, when the command ends, emptied (every process left in it killed: a ``setsid``
child cannot outlive its command) and removed. Groups left by a harness killed mid-command are
swept (empty and older than ten minutes) when the next process probes the layout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from services.execution.ports import PreparedCommand
from services.execution.sandbox.limits import CommandLimits, apply_rlimits

log = logging.getLogger(__name__)

CGROUP_ROOT = Path("/sys/fs/cgroup")
KILL_DEADLINE_S = 10.0
STALE_AFTER_S = 600.0
_PREFIX = "studio-cmd-"


@dataclass(frozen=True)
class CgroupLayout:
    """Where this process may make command groups: a parent directory per controller."""

    version: int
    memory: Path | None
    pids: Path | None


def _own_group(controller: str) -> str | None:
    """This process's group path in the hierarchy of ``controller`` ("" for v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _can_make_group(parent: Path) -> bool:
    probe = parent / f"{_PREFIX}probe-{uuid.uuid4().hex[:8]}"
    try:
        probe.mkdir()
    except OSError:
        return False
    with contextlib.suppress(OSError):
        probe.rmdir()
    return True


def _v1_parent(controller: str) -> Path | None:
    own = _own_group(controller)
    mount = CGROUP_ROOT / controller
    if own is None or not (mount / "cgroup.procs").exists():
        return None
    parent = mount / own.lstrip("/")
    return parent if _can_make_group(parent) else None


def _v2_parent() -> Path | None:
    own = _own_group("")
    if own is None or not (CGROUP_ROOT / "cgroup.controllers").exists():
        return None
    parent = CGROUP_ROOT / own.lstrip("/")
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    if not {"memory", "pids"} <= set(enabled):
        return None
    return parent if _can_make_group(parent) else None


def sweep_stale_groups(parent: Path, older_than_s: float = STALE_AFTER_S) -> int:
    """Remove empty command groups left by a harness that died mid-command; the count.

    Only groups older than ``older_than_s`` are tried (a group another process just made is
    empty until its child joins), and ``rmdir`` refuses a group that still has processes.
    """
    removed = 0
    now = time.time()
    for directory in parent.glob(f"{_PREFIX}*"):
        try:
            if older_than_s > 0 and now - directory.stat().st_mtime < older_than_s:
                continue
            directory.rmdir()
            removed += 1
        except OSError:
            continue  # busy (a live command) or gone
    return removed


@functools.cache
def cgroup_layout() -> CgroupLayout | None:
    """The hierarchies this process may make groups in (probed once, sweeping stale groups),
    or None."""
    if os.geteuid() != 0 and not os.access(CGROUP_ROOT, os.W_OK):
        return None
    layout: CgroupLayout | None = None
    with contextlib.suppress(OSError, ValueError):
        v2 = _v2_parent()
        if v2 is not None:
            layout = CgroupLayout(2, v2, v2)
    if layout is None:
        memory, pids = _v1_parent("memory"), _v1_parent("pids")
        if memory is None and pids is None:
            return None
        layout = CgroupLayout(1, memory, pids)
    for parent in {p for p in (layout.memory, layout.pids) if p is not None}:
        sweep_stale_groups(parent)
    return layout


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


class CommandGroup:
    """The group(s) of one command: made, joined by the child, then emptied and removed."""

    def __init__(self, layout: CgroupLayout, limits: CommandLimits) -> None:
        name = f"{_PREFIX}{uuid.uuid4().hex}"
        self.layout = layout
        self.dirs: list[Path] = []
        for parent in dict.fromkeys(p for p in (layout.memory, layout.pids) if p is not None):
            directory = parent / name
            directory.mkdir()
            self.dirs.append(directory)
        try:
            self._limit(name, limits)
        except OSError:
            self.remove()
            raise

    @property
    def holds_memory(self) -> bool:
        return self.layout.memory is not None

    @property
    def holds_processes(self) -> bool:
        return self.layout.pids is not None

    def _limit(self, name: str, limits: CommandLimits) -> None:
        if self.layout.version == 2:
            directory = self.dirs[0]
            _write(directory / "memory.max", str(limits.memory_bytes))
            with contextlib.suppress(OSError):  # no swap accounting: nothing to cap
                _write(directory / "memory.swap.max", "0")
            _write(directory / "pids.max", str(limits.processes))
            return
        if self.layout.memory is not None:
            _write(self.layout.memory / name / "memory.limit_in_bytes", str(limits.memory_bytes))
        if self.layout.pids is not None:
            _write(self.layout.pids / name / "pids.max", str(limits.processes))

    def join(self, pid: int = 0) -> None:
        """Move process ``pid`` (0: the calling process, a forked child) into every group.

        On cgroup v1 a (single-threaded) forked child moves itself through ``tasks``: see
        :meth:`self_join_files`."""
        if pid == 0 and self.layout.version == 1:
            for path in self.self_join_files():
                _write(path, "0")
            return
        text = str(pid or os.getpid())
        for directory in self.dirs:
            _write(directory / "cgroup.procs", text)

    def self_join_files(self) -> list[Path]:
        """Where a single-threaded process moves *itself* into the group by writing ``0``
        (cgroup v1 only; empty on v2).

        Writing a pid to ``cgroup.procs`` moves a whole thread group: the kernel takes its
        global thread-group lock for writing, which waits for an RCU grace period (about
        10 ms here when migrations are spaced out, as commands are). A thread writing ``0`` to
        ``tasks`` moves only itself and skips that lock (0.1 ms); for a process with one
        thread, the thread is the process."""
        if self.layout.version != 1:
            return []
        return [directory / "tasks" for directory in self.dirs]

    def _members(self) -> set[int]:
        found: set[int] = set()
        for directory in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (directory / "cgroup.procs").read_text().split())
        return found

    def kill_all(self) -> bool:
        """Kill every process in the group until it is empty; False if some survived."""
        if self.layout.version == 2:
            with contextlib.suppress(OSError):
                _write(self.dirs[0] / "cgroup.kill", "1")
        deadline = time.monotonic() + KILL_DEADLINE_S
        while (members := self._members()) and time.monotonic() < deadline:
            for pid in members:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)
        return not self._members()

    def remove(self) -> None:
        """Remove the (empty) groups; one still busy is left and logged."""
        for directory in self.dirs:
            for _ in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)
            else:
                log.warning("cgroup %s is still busy; left in place", directory)

    def close(self) -> None:
        """Kill what is left of the command, then remove its groups."""
        self.kill_all()
        self.remove()


def _limited_preexec(group: CommandGroup | None, limits: CommandLimits,
                     then: Callable[[], None] | None) -> None:
    """In the child: join the group (before any Landlock rule forbids it), rlimits, then the
    sandbox's own step."""
    if group is not None:
        group.join()
    apply_rlimits(limits, memory_in_cgroup=group is not None and group.holds_memory,
                  processes_in_cgroup=group is not None and group.holds_processes)
    if then is not None:
        then()


# The child waits on stdin for the harness to place it (cgroup, rlimits), then runs the command
# with stdin empty. A program that cannot be found answers like the runner would (127).
GATE_SCRIPT = (
    'read -r go && [ "$go" = go ] || exit 125; exec </dev/null; '
    'command -v "$1" >/dev/null 2>&1 || '
    '{ echo "cannot execute: No such file or directory" >&2; exit 127; }; exec "$@"'
)
GATE_SHELL = "/bin/sh"
# The same, for a child that first moves itself into its cgroup (v1: ``0`` written to each
# ``tasks`` file named before ``--``, see :meth:`CommandGroup.self_join_files`).
SELF_JOIN_GATE_SCRIPT = (
    'while [ "$1" != -- ]; do echo 0 > "$1" || '
    '{ echo "studio-gate: the command could not join its cgroup" >&2; exit 125; }; shift; done; '
    "shift; " + GATE_SCRIPT
)


class _Gate:
    """A pipe the child reads ``go`` from once the harness has placed it."""

    def __init__(self, group: CommandGroup | None, limits: CommandLimits, *,
                 keep: bool = False, self_join: bool = False) -> None:
        self.group = group
        self.limits = limits
        self.keep = keep
        self.self_join = self_join  # the child moves itself into the group
        self.read_fd, self.write_fd = os.pipe()
        self.open_fds = [self.read_fd, self.write_fd]

    def release(self, pid: int) -> None:
        """Runs in the harness right after the child started: place it, then let it go on."""
        self._close(self.read_fd)
        if self.group is not None and not self.self_join:
            self.group.join(pid)
        apply_rlimits(self.limits, pid=pid,
                      memory_in_cgroup=self.group is not None and self.group.holds_memory,
                      processes_in_cgroup=self.group is not None and self.group.holds_processes)
        os.write(self.write_fd, b"go\n")
        self._close(self.write_fd)

    def _close(self, fd: int) -> None:
        if fd in self.open_fds:
            self.open_fds.remove(fd)
            os.close(fd)

    def finish(self) -> None:
        for fd in list(self.open_fds):
            self._close(fd)
        if self.group is None:
            return
        if self.keep:
            self.group.kill_all()  # the execution's group: emptied, kept for the next command
        else:
            self.group.close()


def _group(limits: CommandLimits) -> CommandGroup | None:
    layout = cgroup_layout()
    if layout is None:
        return None
    try:
        return CommandGroup(layout, limits)
    except OSError as exc:
        log.warning("no cgroup for this command (%s); rlimits only", exc)
        return None


class ExecutionGroup:
    """One command group for the life of an execution, made on its first command.

    The commands of an execution run one at a time, so one group with the command's limits
    holds each of them in turn: every command joins it, and when the command ends every process
    left in it is killed (the group is emptied, not removed). It is removed when the execution
    ends. This spares each command the making of a group and the writing of its limits.
    """

    def __init__(self, limits: CommandLimits) -> None:
        self.limits = limits
        self._group: CommandGroup | None = None
        self._tried = False

    def group(self) -> CommandGroup | None:
        """The execution's group (made on the first call), or None where none can be made."""
        if not self._tried:
            self._tried = True
            self._group = _group(self.limits)
        return self._group

    def empty(self) -> None:
        """Kill every process left in the group (the end of a command)."""
        if self._group is not None:
            self._group.kill_all()

    def close(self) -> None:
        """Empty the group and remove it (the end of the execution)."""
        if self._group is not None:
            self._group.close()
            self._group = None
        self._tried = False


def with_limits(prepared: PreparedCommand, limits: CommandLimits, *,
                in_child: bool = False, shared: ExecutionGroup | None = None) -> PreparedCommand:
    """``prepared`` with the limits applied before its program starts, and its group closed
    when it ends.

    ``in_child``: applied in the forked child (for a sandbox that needs a ``preexec`` anyway).
    Otherwise the command starts behind a ``/bin/sh`` gate and the harness applies them to the
    waiting child: a ``preexec`` would make every spawn a full ``fork`` of the harness. On
    cgroup v1 the gate moves itself into the group first (:meth:`CommandGroup.self_join_files`).

    ``shared``: the execution's group, joined and, when the command ends, emptied instead of a
    group made and removed for this command alone.
    """
    group = _group(limits) if shared is None else shared.group()
    if in_child:
        preexec = functools.partial(_limited_preexec, group, limits, prepared.preexec)
        finish: Callable[[], None] | None = None
        if group is not None:
            finish = shared.empty if shared is not None else group.close
        return dataclasses.replace(prepared, preexec=preexec, finish=finish)
    joins = group.self_join_files() if group is not None else []
    gate = _Gate(group, limits, keep=shared is not None, self_join=bool(joins))
    if joins:
        argv = [GATE_SHELL, "-c", SELF_JOIN_GATE_SCRIPT, "studio-gate", *map(str, joins), "--",
                *prepared.argv]
    else:
        argv = [GATE_SHELL, "-c", GATE_SCRIPT, "studio-gate", *prepared.argv]
    return dataclasses.replace(
        prepared, argv=argv, stdin=gate.read_fd, on_start=gate.release, finish=gate.finish,
    )
