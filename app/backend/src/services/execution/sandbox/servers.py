"""Long-lived servers (stored stdio MCP servers) in the command sandbox.

A command of the command domain starts behind a gate on its stdin and lives for one call; a
stdio MCP server owns its stdin and lives for the execution. :func:`server_command` wraps a
server's argv for the sandbox of this process so that it starts the way a command would be
confined, without the gate:

* bubblewrap: its own user, mount, PID, network, IPC and UTS namespaces (no network at all; the
  harness's processes and their ``/proc/<pid>/environ`` are not visible), the read-only system
  layout of :mod:`~services.execution.sandbox.layout`, the workspace read-write as its cwd, the
  seccomp filter, a private ``HOME`` and ``TMPDIR``, the command's resource limits;
* Landlock: the command ruleset (system paths, the workspace, a private scratch ``HOME`` and
  ``TMPDIR`` made here and removed when the server ends) and the limits; Landlock's ptrace scope
  keeps ``/proc/<harness pid>/environ`` unreadable;
* no working sandbox (``none``, or unavailable): refused with ``sandbox_unavailable``, never
  started unconfined.

``env`` is the server's complete environment (the caller's scrubbed base and the server's own
declared variables; ``PATH`` is the system search path unless it declares its own); nothing of
the harness's environment is added here.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import CommandSandbox, PreparedCommand
from services.execution.sandbox.cgroup import with_limits
from services.execution.sandbox.landlock import LandlockSandbox
from services.execution.sandbox.layout import SYSTEM_SEARCH_PATH, bwrap_workspace_args
from services.execution.sandbox.seccomp import program_fd
from services.execution.sandbox.selection import SANDBOX_HOME, SANDBOX_TMP, BwrapSandbox


def _bwrap(sandbox: BwrapSandbox, argv: Sequence[str], workspace: Path,
           env: Mapping[str, str]) -> PreparedCommand:
    inner = {**env, "HOME": SANDBOX_HOME, "TMPDIR": SANDBOX_TMP}
    setenv = [part for name, value in inner.items() for part in ("--setenv", name, value)]
    seccomp = program_fd()
    wrapped = [sandbox.executable, *sandbox.system_args, "--seccomp", str(seccomp),
               *bwrap_workspace_args(workspace), "--remount-ro", "/",
               "--chdir", str(workspace), "--clearenv", *setenv, "--", *argv]
    prepared = PreparedCommand(argv=wrapped, env={"PATH": SYSTEM_SEARCH_PATH}, cwd=workspace,
                               pass_fds=(seccomp,))
    return with_limits(prepared, sandbox.limits, in_child=True)


def _landlock(sandbox: LandlockSandbox, argv: Sequence[str], workspace: Path,
              env: Mapping[str, str]) -> PreparedCommand:
    scratch = Path(tempfile.mkdtemp(prefix="studio-mcp-"))
    (scratch / "home").mkdir()
    (scratch / "tmp").mkdir()
    inner = {**env, "HOME": str(scratch / "home"), "TMPDIR": str(scratch / "tmp")}
    try:
        prepared = sandbox.prepare(argv, workspace=workspace, cwd=workspace, env=inner)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    finish = prepared.finish

    def cleanup() -> None:
        try:
            if finish is not None:
                finish()
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    return dataclasses.replace(prepared, finish=cleanup)


def server_command(sandbox: CommandSandbox | None, argv: Sequence[str], *, workspace: Path,
                   env: Mapping[str, str]) -> PreparedCommand:
    """``argv`` wrapped to run as a long-lived server in ``sandbox`` (see the module
    docstring); ``sandbox_unavailable`` when this process has no working sandbox."""
    env = {"PATH": SYSTEM_SEARCH_PATH, **env}
    if isinstance(sandbox, BwrapSandbox):
        return _bwrap(sandbox, argv, workspace, env)
    if isinstance(sandbox, LandlockSandbox):
        return _landlock(sandbox, argv, workspace, env)
    mode = sandbox.mode if sandbox is not None else "none"
    raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE,
                      f"a stored stdio MCP server runs only in the command sandbox (bubblewrap "
                      f"or Landlock); this process has {mode!r}",
                      details={"mode": mode})
