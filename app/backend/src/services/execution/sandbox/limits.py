"""Resource limits for every sandboxed command: memory, processes, open files, file size, CPU.

:class:`CommandLimits` holds the numbers (configurable, with safe defaults); the command's
private ``/tmp`` and ``/var/tmp`` are sized from it too (bubblewrap ``--size``).

They are applied in two layers, before the command's program starts (in the forked child, or by
the harness while the child waits at a gate):

* a **cgroup** per command where this host lets the harness make one
  (:mod:`~services.execution.sandbox.cgroup`): ``memory`` and ``pids`` limits that hold for the
  whole process tree, whatever uid it runs as (the kernel never applies ``RLIMIT_NPROC`` to host
  uid 0), and a way to kill every process left in the group when the command ends;
* **rlimits** always (``RLIMIT_NOFILE``, ``RLIMIT_FSIZE``, ``RLIMIT_CPU`` per process, inherited
  by children), plus ``RLIMIT_AS`` and ``RLIMIT_NPROC`` when no cgroup holds memory or processes.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

MiB = 1024 * 1024
GiB = 1024 * MiB


@dataclass(frozen=True)
class CommandLimits:
    """The ceilings of one command (its whole process tree where a cgroup is available)."""

    memory_bytes: int = 4 * GiB
    processes: int = 1024
    open_files: int = 4096
    file_size_bytes: int = 4 * GiB
    cpu_seconds: int = 3600
    tmp_bytes: int = 1 * GiB


def _set(pid: int, which: int, value: int, extra: int = 0) -> None:
    soft, hard = resource.prlimit(pid, which)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    top = cap + extra if hard == resource.RLIM_INFINITY else min(cap + extra, hard)
    resource.prlimit(pid, which, (cap, top))


def apply_rlimits(limits: CommandLimits, *, memory_in_cgroup: bool,
                  processes_in_cgroup: bool, pid: int = 0) -> None:
    """Set the rlimits of process ``pid`` (0: the calling process, a forked child before
    ``exec``; else a child held at the gate of :mod:`~services.execution.sandbox.cgroup`)."""
    _set(pid, resource.RLIMIT_NOFILE, limits.open_files)
    _set(pid, resource.RLIMIT_FSIZE, limits.file_size_bytes)
    # The soft limit sends SIGXCPU, the hard one SIGKILL a few seconds later.
    _set(pid, resource.RLIMIT_CPU, limits.cpu_seconds, extra=5)
    if not memory_in_cgroup:
        _set(pid, resource.RLIMIT_AS, limits.memory_bytes)
    if not processes_in_cgroup:
        _set(pid, resource.RLIMIT_NPROC, limits.processes)
