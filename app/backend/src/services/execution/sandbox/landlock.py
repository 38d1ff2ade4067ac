"""The Landlock sandbox: file-system confinement applied in the child before ``exec``.

Landlock (Linux 5.13+) lets an unprivileged process restrict its own file access and that of
every process it starts; the restriction cannot be lifted. The ruleset is built and applied in
the forked child (``preexec``), so the harness itself is never restricted.

Rules (every right not granted is denied):

* the system allowlist of :mod:`services.execution.sandbox.layout`: read and execute;
* ``/proc``: read on a few global files (``cpuinfo``, ``meminfo``, ``sys``...), never on
  process directories (the harness's ``environ``!), not even ``/proc/self``;
  ``/dev``: list, and read/write on the harmless character devices only;
* the workspace root directory: read; each of its entries except ``.git``: everything
  (recursively); ``.git``: read; the mirror object directories the clone borrows
  (``objects/info/alternates``): read;
* the caller's per-command scratch directories (``HOME``, ``TMPDIR``): everything.

Landlock rules only *add* rights beneath a directory, with no exceptions, so keeping ``.git``
read-only means the workspace root itself cannot gain new entries from a command (its existing
files and directories stay fully writable). Create a new top-level entry with the workspace tools
first.

Beyond files (:mod:`~services.execution.sandbox.landlock_abi`): no TCP bind or connect (loopback
included), no signal to a process outside the command's domain, no capability (a root harness's
command cannot ``mknod`` a device), the seccomp filter. Every process the command leaves behind
is killed with its cgroup when it ends (:mod:`~services.execution.sandbox.cgroup`); where either
is missing (old ABI, no cgroup), Landlock is not used (:func:`landlock_problem`). There is no PID
or mount namespace: commands still see the host's process list (not their environments).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import platform
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from landlock import FSAccess

from services.execution.ports import CommandSandbox, PreparedCommand
from services.execution.sandbox.cgroup import cgroup_layout, with_limits
from services.execution.sandbox.landlock_abi import (
    MIN_ABI,
    Rule,
    abi_version,
    cap_last_cap,
    confine_child,
)
from services.execution.sandbox.layout import borrowed_object_dirs, readable_system_paths
from services.execution.sandbox.limits import CommandLimits

DEVICES = (
    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty",
)
# Never /proc/<pid>: /proc/<pid>/environ of the harness (same uid) holds its secrets. Nor
# /proc/self: procfs re-creates a process's inodes at exec, so a rule on it would not survive.
PROC_READABLE = (
    "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/loadavg",
    "/proc/uptime", "/proc/version", "/proc/sys", "/sys/devices/system/cpu",
)



def landlock_problem() -> str | None:
    """Why Landlock cannot be used here, or None.

    Landlock confines files, TCP and signals, but a process that outlives its command would keep
    racing the harness: without a cgroup to kill every descendant when the command ends, and
    without the ABI's network and signal scoping (ABI 6), Landlock is not used at all.
    """
    if platform.machine() not in ("x86_64", "aarch64"):
        return f"landlock unavailable: no seccomp filter for {platform.machine()}"
    abi = abi_version()
    if abi < 1:
        return "landlock unavailable: kernel reports no ABI"
    if abi < MIN_ABI:
        return (f"landlock ABI {abi} has no network or signal scoping (ABI {MIN_ABI} needed); "
                "refused")
    if cgroup_layout() is None:
        return ("landlock refused: no cgroup to end every process a command leaves behind "
                "(the harness cannot make one here)")
    return None


@functools.lru_cache(maxsize=1)
def _rights() -> dict[str, int]:
    # The landlock package reads ctypes' errno after a call that succeeded; a value left there by
    # any other ctypes call of this thread would read as the call's failure (EISDIR, say).
    ctypes.set_errno(0)
    handled = int(FSAccess.all())
    file_rights = int(FSAccess.all_file())
    read_exec = int(FSAccess.EXECUTE | FSAccess.READ_FILE | FSAccess.READ_DIR)
    device = int(FSAccess.READ_FILE | FSAccess.WRITE_FILE) | (
        file_rights & ~int(FSAccess.EXECUTE)
    )
    return {
        "handled": handled,
        "file": file_rights,
        "read_exec": read_exec,
        "read": int(FSAccess.READ_FILE | FSAccess.READ_DIR),
        "list": int(FSAccess.READ_DIR),
        "device": device,
        # Everything but making device nodes (capabilities are dropped too: belt and braces).
        "write": handled & ~int(FSAccess.MAKE_CHAR | FSAccess.MAKE_BLOCK),
    }


def _fit(path: str, access: int) -> Rule | None:
    """The rule for ``path``, trimmed to file rights for non-directories; None if it is gone."""
    if os.path.islink(path) or not os.path.exists(path):
        return None
    if not os.path.isdir(path):
        access &= _rights()["file"]
    return (path, access)


def build_rules(workspace: Path, env: Mapping[str, str]) -> list[Rule]:
    """The ruleset for one command (computed in the parent; symlinks never get a rule)."""
    r = _rights()
    wanted: list[Rule] = [(str(p), r["read_exec"]) for p in readable_system_paths()]
    wanted += [(path, r["read"]) for path in PROC_READABLE]
    wanted.append(("/dev", r["list"]))
    wanted += [(dev, r["device"]) for dev in DEVICES]
    wanted.append((str(workspace), r["read_exec"]))
    with os.scandir(workspace) as entries:
        for entry in entries:
            rights = r["read_exec"] if entry.name == ".git" else r["write"]
            wanted.append((entry.path, rights))
    wanted += [(str(objects), r["read"]) for objects in borrowed_object_dirs(workspace)]
    for name in ("HOME", "TMPDIR"):
        scratch = env.get(name)
        if scratch and os.path.isabs(scratch):
            wanted.append((os.path.realpath(scratch), r["write"]))
    rules = [_fit(path, access) for path, access in wanted]
    return [rule for rule in rules if rule is not None]


class LandlockSandbox:
    """Applies the Landlock ruleset of :func:`build_rules` to each command."""

    def __init__(self, limits: CommandLimits | None = None) -> None:
        self.limits = limits if limits is not None else CommandLimits()

    @property
    def mode(self) -> str:
        return "landlock"

    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """Itself: each command gets its own Landlock domain (see the module's docstring)."""
        return contextlib.nullcontext(self)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        rules = build_rules(workspace, env)
        preexec: Callable[[], None] = functools.partial(
            confine_child, _rights()["handled"], rules, cap_last_cap(), platform.machine()
        )
        prepared = PreparedCommand(argv=list(argv), env=dict(env), cwd=cwd, preexec=preexec)
        return with_limits(prepared, self.limits, in_child=True)
