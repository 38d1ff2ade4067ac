"""`studio tools list` and `studio tools call` as a user runs them (real subprocesses)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from services.execution.errors import ErrorCode
from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
ERROR_FIELDS = {"code", "message", "details", "retryable", "request_id", "correlation_id"}


def studio(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return warm_cli.run([*STUDIO, *args], capture_output=True, text=True, cwd=cwd, timeout=60,
                        check=False)


def test_tools_list_is_a_json_array_of_valid_tools() -> None:
    proc = studio("tools", "list")
    assert proc.returncode == 0, proc.stderr
    tools = json.loads(proc.stdout)
    names = {t["name"] for t in tools}
    assert {"workspace_read_file", "git_push", "command_run"} <= names
    assert len(tools) == 12 + 14 + 1
    for tool in tools:
        assert set(tool) == {"name", "domain", "operation", "description", "parameters"}
        assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", tool["name"])
        assert tool["name"] == f"{tool['domain']}_{tool['operation']}"
        Draft202012Validator.check_schema(tool["parameters"])
        assert tool["parameters"]["type"] == "object"
        assert tool["parameters"]["additionalProperties"] is False


def test_call_prints_exactly_the_envelope_and_exits_zero(workspace: Path) -> None:
    (workspace / "a.txt").write_text("hello\n")
    proc = studio("tools", "call", "workspace.read_file", "--workspace", str(workspace),
                  "--args", '{"path": "a.txt"}')
    assert proc.returncode == 0, proc.stderr
    envelope = json.loads(proc.stdout)
    assert proc.stdout.count("\n") == 1
    assert envelope["ok"] is True and envelope["tool_name"] == "workspace_read_file"
    assert "hello" in json.dumps(envelope["result"])


def test_error_envelope_exits_one(workspace: Path) -> None:
    proc = studio("tools", "call", "workspace.read_file", "--workspace", str(workspace),
                  "--args", '{"path": "../outside/secret.txt"}')
    assert proc.returncode == 1
    envelope = json.loads(proc.stdout)
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == ErrorCode.PATH_OUTSIDE_WORKSPACE.value
    assert set(envelope["error"]) == ERROR_FIELDS
    assert "TOP-SECRET" not in proc.stdout


@pytest.mark.parametrize("args", [
    ["tools", "call", "workspace.read_file", "--workspace", "{ws}", "--args", "{not json"],
    ["tools", "call", "workspace.read_file", "--workspace", "{ws}", "--args", "[1]"],
    ["tools", "call", "nope.missing", "--workspace", "{ws}"],
    ["tools", "call", "workspace.read_file"],
    ["tools", "call", "workspace.read_file", "--workspace", "{ws}", "--bogus-flag"],
    ["tools", "call"],
    ["tools", "call", "workspace.read_file", "--workspace", "/no/such/dir"],
])
def test_usage_errors_are_envelopes_on_stdout_with_exit_two(workspace: Path,
                                                             args: list[str]) -> None:
    proc = studio(*[a.replace("{ws}", str(workspace)) for a in args])
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    envelope = json.loads(proc.stdout)
    assert envelope["ok"] is False and envelope["error"]["code"] == "invalid_arguments"
    assert set(envelope["error"]) == ERROR_FIELDS
