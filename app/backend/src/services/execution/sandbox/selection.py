"""Command sandboxes: bubblewrap, Landlock or none, chosen once per process.

:func:`select_sandbox` turns the deployment's ``STUDIO_SANDBOX`` value (read by
``services.settings``, never here) into a :class:`~services.execution.ports.CommandSandbox`:

* ``auto``: bubblewrap if it really starts, else Landlock if the kernel applies it, else no sandbox
  with a loud warning;
* ``required``: the same order, but with nothing working every command is refused with
  ``sandbox_unavailable``;
* ``bwrap`` / ``landlock``: that one, or refusals when it does not work;
* ``none``: commands run unconfined (development only): every command logs a warning and its
  result carries one; refused (every command ``sandbox_unavailable``) in production.

Probing runs a real ``true`` under the sandbox once per mode and process; the result is cached.

Contract with the caller (the command domain): ``env`` is the complete environment of the
command, already scrubbed; its ``HOME`` and ``TMPDIR`` name per-command scratch directories that
the caller created and owns. Bubblewrap replaces them with a private tmpfs; Landlock makes them
writable.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from services.execution.errors import ConfigError, ErrorCode, ToolFailure
from services.execution.ports import CommandSandbox, PreparedCommand
from services.execution.sandbox.cgroup import ExecutionGroup, with_limits
from services.execution.sandbox.landlock import LandlockSandbox, landlock_problem
from services.execution.sandbox.layout import (
    SYSTEM_SEARCH_PATH,
    bwrap_system_args,
    bwrap_workspace_args,
)
from services.execution.sandbox.limits import CommandLimits
from services.execution.sandbox.seccomp import program_fd
from services.execution.sandbox.session import bwrap_session
from services.settings import SandboxMode

log = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 20.0
DEFAULT_LIMITS = CommandLimits()
UNCONFINED_WARNING = (
    "NO COMMAND SANDBOX: agent commands run UNCONFINED, with the harness's own file access, "
    "network and processes (STUDIO_SANDBOX=none or nothing works); never use this in production"
)
SANDBOX_HOME = "/tmp/home"
SANDBOX_TMP = "/tmp"

__all__ = [
    "BwrapSandbox",
    "CommandLimits",
    "LandlockSandbox",
    "NoSandbox",
    "UnavailableSandbox",
    "select_sandbox",
]


class NoSandbox:
    """Runs commands as they are (still with the caller's scrubbed env, process group and
    resource limits)."""

    def __init__(self, limits: CommandLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits

    @property
    def mode(self) -> str:
        return SandboxMode.NONE.value

    @contextlib.contextmanager
    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> Iterator[CommandSandbox]:
        """The same sandbox with one cgroup for the whole execution: each command joins it and
        everything left in it is killed when the command ends (nothing outlives its command);
        the group is removed when the execution ends."""
        group = ExecutionGroup(self.limits)
        try:
            yield _NoSandboxSession(self, group)
        finally:
            group.close()

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str],
        group: ExecutionGroup | None = None,
    ) -> PreparedCommand:
        log.warning("%s (command in %s)", UNCONFINED_WARNING, workspace)
        return with_limits(PreparedCommand(argv=list(argv), env=dict(env), cwd=cwd), self.limits,
                           shared=group)


class _NoSandboxSession:
    """:class:`NoSandbox` for one execution: its commands share the execution's cgroup."""

    def __init__(self, sandbox: NoSandbox, group: ExecutionGroup) -> None:
        self.sandbox = sandbox
        self.group = group

    @property
    def mode(self) -> str:
        return self.sandbox.mode

    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """Itself: already the execution's."""
        return contextlib.nullcontext(self)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        return self.sandbox.prepare(argv, workspace=workspace, cwd=cwd, env=env,
                                    group=self.group)


class UnavailableSandbox:
    """Stands for a sandbox that was asked for and does not work: every command is refused."""

    def __init__(self, requested: str, reason: str) -> None:
        self.requested = requested
        self.reason = reason

    @property
    def mode(self) -> str:
        return "unavailable"

    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """Itself: nothing lives longer than a command."""
        return contextlib.nullcontext(self)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        raise ToolFailure(
            ErrorCode.SANDBOX_UNAVAILABLE,
            f"commands are refused: sandbox mode {self.requested!r} is configured and no "
            "sandbox works on this host",
            details={"requested": self.requested, "reason": self.reason},
        )


class BwrapSandbox:
    """Bubblewrap: a fresh user, mount, PID, network, IPC and UTS namespace per command.

    Inside, the command runs as an unprivileged uid and gid (:data:`SANDBOX_UID`) with every
    capability dropped, in a new session, under the seccomp filter of
    :mod:`~services.execution.sandbox.seccomp`. Bubblewrap maps that id to the harness's own uid,
    so the workspace (owned by the harness) stays writable, files the command creates belong to
    the harness, and git sees its owner (no "dubious ownership"). Because that host uid may be
    root, ``/proc/sys`` is read-only and the filter refuses set-user/group-ID modes: the kernel
    lets a capability-less process whose host uid is 0 write sysctls, and a set-user-ID file
    left in the workspace would run as root outside.
    """

    def __init__(self, executable: str, limits: CommandLimits = DEFAULT_LIMITS) -> None:
        self.executable = executable
        self.limits = limits
        self.system_args = tuple(bwrap_system_args(limits.tmp_bytes))

    @property
    def mode(self) -> str:
        return SandboxMode.BWRAP.value

    def session(self, workspace: Path, notify: Callable[[str, str], None]
                ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """One sandbox for the whole execution in ``workspace``
        (:mod:`~services.execution.sandbox.session`)."""
        return bwrap_session(self, workspace, notify)

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str],
        extra_args: Sequence[str] = (),
    ) -> PreparedCommand:
        """``extra_args``: more bubblewrap mounts, after the workspace's (the egress sandbox's,
        :mod:`~services.execution.sandbox.egress`)."""
        inner_env = dict(env)
        inner_env["HOME"] = SANDBOX_HOME
        inner_env["TMPDIR"] = SANDBOX_TMP
        setenv: list[str] = []
        for name, value in inner_env.items():
            setenv += ["--setenv", name, value]
        seccomp = program_fd()
        wrapped = [
            self.executable,
            *self.system_args,
            "--seccomp", str(seccomp),
            *bwrap_workspace_args(workspace),
            *extra_args,
            "--remount-ro", "/",
            "--chdir", str(cwd),
            "--clearenv",
            *setenv,
            "--",
            *argv,
        ]
        # bwrap itself gets a bare environment: nothing of ours (or the model's) reaches it.
        prepared = PreparedCommand(
            argv=wrapped, env={"PATH": SYSTEM_SEARCH_PATH}, cwd=cwd, pass_fds=(seccomp,)
        )
        return with_limits(prepared, self.limits)


def _run_probe(sandbox: CommandSandbox) -> str | None:
    """Run ``true`` under ``sandbox`` in a throw-away workspace; the problem, or None."""
    with tempfile.TemporaryDirectory(prefix="studio-sandbox-probe-") as scratch:
        root = Path(scratch)
        (root / "ws").mkdir()
        env = {"PATH": SYSTEM_SEARCH_PATH, "HOME": scratch, "TMPDIR": scratch}
        prepared = sandbox.prepare(["true"], workspace=root / "ws", cwd=root / "ws", env=env)
        try:
            done = _probe_once(prepared)
        except (OSError, subprocess.SubprocessError) as exc:
            return f"{sandbox.mode} probe failed: {exc}"
        finally:
            if prepared.finish is not None:
                prepared.finish()
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip()[:500]
        return f"{sandbox.mode} probe exited with {done.returncode}: {detail}"
    return None


def _probe_once(prepared: PreparedCommand) -> subprocess.CompletedProcess[bytes]:
    try:
        proc = subprocess.Popen(
            prepared.argv, env=prepared.env, cwd=prepared.cwd, preexec_fn=prepared.preexec,
            stdin=subprocess.DEVNULL if prepared.stdin is None else prepared.stdin,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=prepared.pass_fds,
        )
    finally:
        prepared.close_fds()
    with proc:
        try:
            if prepared.on_start is not None:
                prepared.on_start(proc.pid)
            out, err = proc.communicate(timeout=PROBE_TIMEOUT_S)
        except BaseException:
            proc.kill()
            raise
    return subprocess.CompletedProcess(prepared.argv, proc.returncode, out, err)


def _probe_bwrap(limits: CommandLimits) -> BwrapSandbox | str:
    executable = shutil.which("bwrap", path=SYSTEM_SEARCH_PATH)
    if executable is None:
        return "bwrap is not installed"
    sandbox = BwrapSandbox(executable, limits)
    problem = _run_probe(sandbox)
    return problem if problem is not None else sandbox


def _probe_landlock(limits: CommandLimits) -> LandlockSandbox | str:
    problem = landlock_problem()
    if problem is not None:
        return problem
    sandbox = LandlockSandbox(limits)
    problem = _run_probe(sandbox)
    return problem if problem is not None else sandbox


def _strongest(limits: CommandLimits) -> tuple[CommandSandbox | None, list[str]]:
    problems: list[str] = []
    for probe in (_probe_bwrap, _probe_landlock):
        found = probe(limits)
        if not isinstance(found, str):
            return found, problems
        problems.append(found)
    return None, problems


def select_sandbox(mode: str, limits: CommandLimits = DEFAULT_LIMITS, *,
                   production: bool = False) -> CommandSandbox:
    """The sandbox for ``mode`` (a :class:`~services.settings.SandboxMode` value), probed once
    per mode and limits. In ``production``, no sandbox is no command: a mode that ends unconfined
    refuses every command instead."""
    chosen = _select(mode, limits)
    if production and isinstance(chosen, NoSandbox):
        log.error("STUDIO_SANDBOX=%s would run commands unconfined; refused in production", mode)
        return UnavailableSandbox(mode, "running commands without a sandbox is refused in "
                                        "production (STUDIO_ENV=production)")
    return chosen


@functools.cache
def _select(mode: str, limits: CommandLimits) -> CommandSandbox:
    try:
        wanted = SandboxMode(mode)
    except ValueError:
        choices = ", ".join(m.value for m in SandboxMode)
        raise ConfigError(f"unknown sandbox mode {mode!r} (expected one of {choices})") from None
    if wanted is SandboxMode.NONE:
        log.warning(UNCONFINED_WARNING)
        return NoSandbox(limits)
    if wanted in (SandboxMode.BWRAP, SandboxMode.LANDLOCK):
        probe = _probe_bwrap if wanted is SandboxMode.BWRAP else _probe_landlock
        found = probe(limits)
        if isinstance(found, str):
            log.error("sandbox %s requested but unavailable: %s", wanted.value, found)
            return UnavailableSandbox(wanted.value, found)
        return found
    sandbox, problems = _strongest(limits)
    if sandbox is not None:
        if problems:
            log.warning("sandbox: using %s (%s)", sandbox.mode, "; ".join(problems))
        return sandbox
    reason = "; ".join(problems)
    if wanted is SandboxMode.REQUIRED:
        log.error("sandbox required but none works, commands will be refused: %s", reason)
        return UnavailableSandbox(wanted.value, reason)
    log.warning(
        "NO COMMAND SANDBOX: STUDIO_SANDBOX=auto found neither bubblewrap nor Landlock (%s); "
        "agent commands run UNCONFINED with the harness's own file access. "
        "Set STUDIO_SANDBOX=required in production.", reason,
    )
    return NoSandbox(limits)
