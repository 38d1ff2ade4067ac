"""command.run: argument validation, environment, exit codes, cwd, timeout and output capping.

These run without a sandbox (mode ``none``) where confinement is not the point; the sandboxes
themselves are tested in tests/integration/execution/test_command_sandbox.py.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from services.execution.errors import ConfigError
from services.execution.sandbox.selection import NoSandbox, UnavailableSandbox, select_sandbox
from services.execution.tool_domains.command import tools as command
from services.execution.tool_domains.command.process import HeadTail
from services.execution.tool_domains.context import ToolDomainContext
from tests.unit.execution.command_helpers import (
    command_context,
    gone,
    run_command,
    sandbox_context,
    sleep_marker,
    watching_pids,
)


@pytest.fixture
def ctx(workspace: Path) -> ToolDomainContext:
    return command_context(workspace, NoSandbox())


def _error_code(envelope: dict[str, object]) -> object:
    assert envelope["ok"] is False, envelope
    error = envelope["error"]
    assert isinstance(error, dict)
    return error["code"]


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"argv": ["true"], "command": "true"},
        {"argv": []},
        {"command": ""},
        {"argv": ["echo", "a\x00b"]},
        {"command": "true", "timeout_s": 0},
        {"command": "true", "timeout_s": -1},
        {"command": "true", "shell": True},
        {"command": "true", "env": {"1BAD": "x"}},
        {"command": "true", "env": {"A-B": "x"}},
        {"command": "true", "env": {"OK": "a\x00b"}},
    ],
)
def test_invalid_arguments(ctx: ToolDomainContext, args: dict[str, object]) -> None:
    assert _error_code(run_command(ctx, **args)) == "invalid_arguments"


@pytest.mark.parametrize(
    "name",
    ["LD_PRELOAD", "LD_LIBRARY_PATH", "ld_audit", "GCONV_PATH", "BASH_ENV", "GLIBC_TUNABLES",
     "HOME", "TMPDIR"],
)
def test_loader_and_reserved_variables_are_denied(ctx: ToolDomainContext, name: str) -> None:
    envelope = run_command(ctx, command="true", env={name: "/tmp/x"})
    assert _error_code(envelope) == "command_denied"


def test_model_env_is_passed_and_parent_env_is_not(
    ctx: ToolDomainContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = f"sk-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("STUDIO_DATABASE_URL", f"postgresql://u:{secret}@db/x")
    envelope = run_command(ctx, argv=["env"], env={"FOO_BAR": "baz"})
    assert envelope["ok"] is True
    out = envelope["result"]["stdout"]
    assert "FOO_BAR=baz" in out
    assert "TERM=dumb" in out
    assert secret not in out
    assert "OPENAI_API_KEY" not in out and "STUDIO_" not in out


def test_non_zero_exit_is_a_successful_call(ctx: ToolDomainContext) -> None:
    envelope = run_command(ctx, command="echo out; echo err >&2; exit 3")
    assert envelope["ok"] is True
    result = envelope["result"]
    assert result["exit_code"] == 3
    assert result["stdout"] == "out\n" and result["stderr"] == "err\n"
    assert result["timed_out"] is False and result["truncated"] is False
    assert result["sandbox"] == "none" and result["cwd"] == "."


def test_argv_runs_without_a_shell(ctx: ToolDomainContext) -> None:
    result = run_command(ctx, argv=["echo", "$HOME", "a b"])["result"]
    assert result["stdout"] == "$HOME a b\n"
    assert result["exit_code"] == 0


def test_missing_program_answers_like_a_shell(ctx: ToolDomainContext) -> None:
    result = run_command(ctx, argv=[f"no-such-program-{uuid.uuid4().hex}"])["result"]
    assert result["exit_code"] == 127
    assert "cannot execute" in result["stderr"]


def test_stdin_is_empty(ctx: ToolDomainContext) -> None:
    result = run_command(ctx, command="cat; echo done", timeout_s=30)["result"]
    assert result["stdout"] == "done\n" and result["timed_out"] is False


@pytest.mark.parametrize(
    ("cwd", "code"),
    [
        ("../outside", "path_outside_workspace"),
        ("/etc", "path_outside_workspace"),
        ("missing", "path_not_found"),
        ("file.txt", "not_a_directory"),
        (".git", "protected_path"),
        ("a\x00b", "invalid_arguments"),
    ],
)
def test_cwd_refusals(ctx: ToolDomainContext, workspace: Path, cwd: str, code: str) -> None:
    (workspace / "file.txt").write_text("x")
    (workspace / ".git").mkdir()
    assert _error_code(run_command(ctx, command="pwd", cwd=cwd)) == code


def test_cwd_symlink_leading_outside_is_refused(ctx: ToolDomainContext, workspace: Path) -> None:
    (workspace / "link").symlink_to(workspace.parent / "outside")
    envelope = run_command(ctx, command="pwd", cwd="link")
    assert _error_code(envelope) == "path_outside_workspace"


def test_cwd_inside_the_workspace(ctx: ToolDomainContext, workspace: Path) -> None:
    (workspace / "sub" / "dir").mkdir(parents=True)
    result = run_command(ctx, command="pwd", cwd="sub/dir")["result"]
    assert result["stdout"].strip() == str((workspace / "sub" / "dir").resolve())
    assert result["cwd"] == "sub/dir"


def test_timeout_is_a_result_and_kills_the_group(ctx: ToolDomainContext) -> None:
    marker = sleep_marker()
    with watching_pids(marker) as seen:
        envelope = run_command(ctx, command=f"sleep {marker} & sleep {marker}", timeout_s=1)
    assert envelope["ok"] is True
    result = envelope["result"]
    assert result["timed_out"] is True and result["exit_code"] is None
    assert seen, "the watcher never saw the command's processes"
    assert gone(marker)


def test_timeout_is_capped_by_the_context(workspace: Path) -> None:
    ctx = command_context(workspace, NoSandbox(), max_command_timeout_s=0.5)
    result = run_command(ctx, command="sleep 30", timeout_s=1000)["result"]
    assert result["timeout_s"] == 0.5 and result["timed_out"] is True


def test_background_job_does_not_hold_the_call(ctx: ToolDomainContext) -> None:
    envelope = run_command(ctx, command="sleep 60 & echo started", timeout_s=30)
    result = envelope["result"]
    assert result["timed_out"] is False and result["exit_code"] == 0
    assert result["stdout"] == "started\n"


def test_closed_pipes_still_wait_for_the_exit(ctx: ToolDomainContext) -> None:
    script = "exec >&- 2>&-; sleep 0.3; exit 7"
    result = run_command(ctx, command=script, timeout_s=30)["result"]
    assert result["exit_code"] == 7 and result["timed_out"] is False


def test_output_keeps_head_and_tail(workspace: Path) -> None:
    ctx = command_context(workspace, NoSandbox(), output_cap_bytes=1000)
    script = "printf HEAD; yes x | head -c 10000; printf TAIL; yes e | head -c 3000 >&2"
    result = run_command(ctx, command=script)["result"]
    out = result["stdout"]
    assert out.startswith("HEADx\nx") and out.endswith("x\nTAIL")
    assert "\n...[truncated 9008 bytes]...\n" in out
    assert len(out.encode()) <= 1000 + len("\n...[truncated 9008 bytes]...\n")
    assert "[truncated 2000 bytes]" in result["stderr"]
    assert result["truncated"] is True
    assert result["output_bytes"] == {"stdout": 10008, "stderr": 3000}


def test_output_is_decoded_with_replacement(ctx: ToolDomainContext) -> None:
    result = run_command(ctx, command=r"printf 'ok \377\n'")["result"]
    assert result["stdout"] == "ok \ufffd\n"


@pytest.mark.parametrize("chunk", [1, 7, 333, 4096])
def test_head_tail_matches_a_reference(chunk: int) -> None:
    data = bytes(range(256)) * 40
    buffer = HeadTail(1000)
    for start in range(0, len(data), chunk):
        buffer.feed(data[start : start + chunk])
    dropped = len(data) - 1000
    assert buffer.total == len(data) and buffer.dropped == dropped
    expected = (data[:500].decode("utf-8", "replace")
                + f"\n...[truncated {dropped} bytes]...\n"
                + data[-500:].decode("utf-8", "replace"))
    assert buffer.text() == expected


def test_no_sandbox_configured_is_refused(workspace: Path) -> None:
    ctx = command_context(workspace, None)
    assert _error_code(run_command(ctx, command="true")) == "sandbox_unavailable"


def test_required_mode_without_a_sandbox_refuses_commands(workspace: Path) -> None:
    ctx = command_context(workspace, UnavailableSandbox("required", "bwrap missing; no landlock"))
    envelope = run_command(ctx, command="true")
    assert _error_code(envelope) == "sandbox_unavailable"
    assert envelope["error"]["details"]["requested"] == "required"


def test_select_sandbox_modes() -> None:
    assert select_sandbox("none").mode == "none"
    assert select_sandbox("none") is select_sandbox("none")
    with pytest.raises(ConfigError):
        select_sandbox("bogus")


def test_schema_is_strict() -> None:
    schema = command.SPECS[0].neutral_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {"argv", "command", "cwd", "timeout_s", "env"}
    assert command.SPECS[0].name == "command_run"


@pytest.mark.parametrize("mode", ["bwrap", "bwrap-session", "landlock", "none"])
def test_a_command_asked_to_stop_is_killed_with_its_children(workspace: Path, mode: str) -> None:
    """``stop_requested`` (a cancelled flowchart run) answering True: the command and the sleep
    it started are killed (``SIGKILL``, not a timeout). The control is the first answers (False):
    the command ran meanwhile, it had printed ``started``."""
    marker = sleep_marker()
    asked: list[bool] = []

    def stop() -> bool:
        asked.append(len(asked) >= 2)
        return asked[-1]

    with sandbox_context(workspace, mode, stop_requested=stop) as ctx:
        envelope = run_command(ctx, command=f"echo started; sleep {marker}", timeout_s=3000)
    assert envelope["ok"] is True, envelope
    result = envelope["result"]
    assert asked[:3] == [False, False, True], asked
    assert "started" in result["stdout"], result
    assert (result["signal"], result["timed_out"]) == ("SIGKILL", False), result
    assert gone(marker), "the sleep outlived its stopped command"
