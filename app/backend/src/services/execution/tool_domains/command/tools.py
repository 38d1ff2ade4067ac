"""The ``command`` tool domain: ``command.run``, one process (tree) in the execution's sandbox.

The command gets an environment built from scratch (:func:`command_environment`): a fixed
``PATH``, locale, ``TERM=dumb``, per-command ``HOME`` and ``TMPDIR``, a few non-interactive
switches, plus the variables the model passes in ``env``. Nothing of the harness's own
environment is inherited, so provider keys, tokens and database URLs cannot leak into it.

Outcomes:

* exits (zero or not) are successful calls: ``exit_code``, ``stdout``, ``stderr`` and so on, so
  the model sees its failing tests;
* a timeout is a successful call too, with ``timed_out: true`` and ``exit_code: null``: the
  output up to the deadline is what the model needs to decide what to do next (``command_timeout``
  stays reserved for refusals by a caller-level wall clock);
* refusals and breakage are errors: ``invalid_arguments``, ``command_denied`` (loader variables,
  reserved names), ``path_*`` / ``not_a_directory`` for ``cwd``, ``sandbox_unavailable``.

The sandbox comes from ``ctx.sandbox`` (see :mod:`services.execution.ports`); this module does not
know how sandboxes work.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from services.execution.confinement import resolve_path
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import CommandSandbox
from services.execution.tool_domains.command.process import CommandOutcome, run_prepared
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolArgs, ToolSpec

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_ENV_VARS = 64
MAX_ENV_VALUE_BYTES = 32 * 1024
DEFAULT_TIMEOUT_S = 120.0

SYSTEM_PATH_DIRS = (
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
)
LOADER_PREFIXES = ("LD_", "DYLD_", "BASH_FUNC_")
LOADER_NAMES = frozenset({
    "GCONV_PATH", "GLIBC_TUNABLES", "HOSTALIASES", "LOCPATH", "NLSPATH", "MALLOC_TRACE",
    "BASH_ENV", "ENV", "PROMPT_COMMAND",
})
RESERVED_NAMES = frozenset({"HOME", "TMPDIR"})


def _toolchain_path() -> str:
    """The fixed ``PATH``: the harness's Python toolchain first (so ``python3``/``pytest`` work)."""
    dirs: list[str] = []
    for prefix in (sys.prefix, sys.base_prefix):
        bin_dir = os.path.join(prefix, "bin")
        if os.path.isdir(bin_dir) and bin_dir not in dirs and bin_dir not in SYSTEM_PATH_DIRS:
            dirs.append(bin_dir)
    return ":".join([*dirs, *SYSTEM_PATH_DIRS])


SAFE_PATH = _toolchain_path()

BASE_ENVIRONMENT: dict[str, str] = {
    "PATH": SAFE_PATH,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TERM": "dumb",
    "CI": "1",
    "NO_COLOR": "1",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_TERMINAL_PROMPT": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONUNBUFFERED": "1",
}


class RunArgs(ToolArgs):
    """Arguments of ``command.run``: exactly one of ``argv`` and ``command``."""

    argv: list[str] | None = Field(
        default=None, min_length=1,
        description="Program and arguments, executed directly (no shell). Give this or command.",
    )
    command: str | None = Field(
        default=None, min_length=1,
        description="A shell command line, run with /bin/sh -c. Give this or argv.",
    )
    cwd: str = Field(default=".", description="Working directory, relative to the workspace.")
    timeout_s: float = Field(
        default=DEFAULT_TIMEOUT_S, gt=0,
        description="Seconds before the whole process group is killed (capped by the harness).",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Extra environment variables for this command.",
    )

    @model_validator(mode="after")
    def _one_of_argv_command(self) -> RunArgs:
        if (self.argv is None) == (self.command is None):
            raise ValueError("give exactly one of argv and command")
        return self

    @field_validator("argv")
    @classmethod
    def _argv_text(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any("\x00" in part for part in value):
            raise ValueError("argv must not contain NUL bytes")
        return value

    @field_validator("command")
    @classmethod
    def _command_text(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:
            raise ValueError("command must not contain NUL bytes")
        return value

    @field_validator("env")
    @classmethod
    def _env_shape(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_ENV_VARS:
            raise ValueError(f"at most {MAX_ENV_VARS} environment variables")
        for name, text in value.items():
            if not ENV_NAME.match(name):
                raise ValueError(f"invalid environment variable name {name!r}")
            if "\x00" in text or len(text.encode("utf-8", "surrogateescape")) > MAX_ENV_VALUE_BYTES:
                raise ValueError(f"invalid value for environment variable {name}")
        return value


def check_model_env(env: dict[str, str]) -> None:
    """Refuse variables that change how programs are loaded, or that the harness owns."""
    for name in env:
        upper = name.upper()
        if upper.startswith(LOADER_PREFIXES) or upper in LOADER_NAMES:
            raise ToolFailure(ErrorCode.COMMAND_DENIED,
                              f"environment variable {name} is not allowed (it changes how "
                              "programs are loaded or started)", details={"name": name})
        if upper in RESERVED_NAMES:
            raise ToolFailure(ErrorCode.COMMAND_DENIED,
                              f"environment variable {name} is set by the harness",
                              details={"name": name})


def command_environment(model_env: dict[str, str], scratch: Path) -> dict[str, str]:
    """The whole environment of a command: the allowlist, the model's variables, a scratch dir.

    ``scratch`` (empty, per command, removed afterwards) serves as both ``HOME`` and ``TMPDIR``.
    """
    env = dict(BASE_ENVIRONMENT)
    env.update(model_env)
    env["HOME"] = str(scratch)
    env["TMPDIR"] = str(scratch)
    return env


def _resolve_cwd(ctx: ToolDomainContext, raw: str) -> tuple[Path, str]:
    resolved = resolve_path(ctx.resolved_workspace_root(), raw)
    if not resolved.exists():
        raise ToolFailure(ErrorCode.PATH_NOT_FOUND, f"cwd {raw!r} does not exist",
                          details={"path": raw})
    if not resolved.absolute.is_dir():
        raise ToolFailure(ErrorCode.NOT_A_DIRECTORY, f"cwd {raw!r} is not a directory",
                          details={"path": raw})
    return resolved.absolute, resolved.display


UNCONFINED_NOTICE = ("this command ran WITHOUT a sandbox (STUDIO_SANDBOX=none): "
                     "development only")


def _result(outcome: CommandOutcome, sandbox: CommandSandbox, cwd: str,
            timeout_s: float) -> dict[str, Any]:
    result = {
        "exit_code": outcome.exit_code,
        "signal": outcome.signal,
        "stdout": outcome.stdout.text(),
        "stderr": outcome.stderr.text(),
        "truncated": bool(outcome.stdout.dropped or outcome.stderr.dropped),
        "output_bytes": {"stdout": outcome.stdout.total, "stderr": outcome.stderr.total},
        "timed_out": outcome.timed_out,
        "timeout_s": timeout_s,
        "duration_ms": outcome.duration_ms,
        "sandbox": sandbox.mode,
        "cwd": cwd,
    }
    if sandbox.mode == "none":
        result["warning"] = UNCONFINED_NOTICE
    return result


def run(args: RunArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    """``command.run``."""
    sandbox = ctx.sandbox
    if sandbox is None:
        raise ToolFailure(ErrorCode.SANDBOX_UNAVAILABLE, "no command sandbox is configured")
    check_model_env(args.env)
    cwd, cwd_display = _resolve_cwd(ctx, args.cwd)
    argv = list(args.argv) if args.argv is not None else ["/bin/sh", "-c", args.command or ""]
    timeout_s = min(args.timeout_s, ctx.max_command_timeout_s)
    with tempfile.TemporaryDirectory(prefix="studio-cmd-", ignore_cleanup_errors=True) as tmp:
        env = command_environment(args.env, Path(tmp))
        prepared = sandbox.prepare(
            argv, workspace=ctx.resolved_workspace_root(), cwd=cwd, env=env
        )
        outcome = run_prepared(prepared, timeout_s=timeout_s, cap=ctx.output_cap_bytes,
                               should_stop=ctx.stop_requested)
    return _result(outcome, sandbox, cwd_display, timeout_s)


SPECS: tuple[ToolSpec, ...] = (
    ToolSpec(
        domain="command",
        operation="run",
        description=(
            "Run a command in the workspace (sandboxed, no network, scrubbed environment). "
            "A non-zero exit is reported in exit_code, not as an error. Output is capped: the "
            "head and tail of stdout and stderr are kept. On timeout the whole process group is "
            "killed and timed_out is true."
        ),
        args_model=RunArgs,
        handler=run,
        mutates=True,
    ),
)
