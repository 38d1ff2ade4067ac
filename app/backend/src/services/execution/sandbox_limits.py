"""Resource limits for every sandboxed command: memory, processes, open files, file size, CPU.

:class:`CommandLimits` holds the numbers (configurable, with safe defaults); the command's
private ``/tmp`` and ``/var/tmp`` are sized from it too (bubblewrap ``--size``).

They are applied in two layers, in the forked child before ``exec``:

* a **cgroup** per command where this host lets the harness make one
  (:mod:`~services.execution.sandbox_cgroup`): ``memory`` and ``pids`` limits that hold for the
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


def _set(which: int, value: int) -> None:
    soft, hard = resource.getrlimit(which)
    cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(which, (cap, cap))


def apply_rlimits(limits: CommandLimits, *, memory_in_cgroup: bool,
                  processes_in_cgroup: bool) -> None:
    """Set the rlimits of the calling process (the forked child, before ``exec``)."""
    _set(resource.RLIMIT_NOFILE, limits.open_files)
    _set(resource.RLIMIT_FSIZE, limits.file_size_bytes)
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard == resource.RLIM_INFINITY or hard > limits.cpu_seconds:
        # The soft limit sends SIGXCPU, the hard one SIGKILL a few seconds later.
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    if not memory_in_cgroup:
        _set(resource.RLIMIT_AS, limits.memory_bytes)
    if not processes_in_cgroup:
        _set(resource.RLIMIT_NPROC, limits.processes)
