"""The Claude CLI's environment: the allowlist, the per-run variables and the launcher."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from services.execution.providers.claude_env import (
    SDK_PROTOCOL_ENV,
    bundled_cli_path,
    claude_env_from,
    session_env,
    write_launcher,
)
from services.execution.providers.cloud_auth import auth_mode

PARENT = {
    "ANTHROPIC_API_KEY": "sk-ant-parent",
    "AWS_REGION": "eu-west-1",
    "CLAUDE_CODE_USE_BEDROCK": "1",
    "HTTPS_PROXY": "http://proxy:3128",
    "PATH": "/usr/bin:/bin",
    "STUDIO_GITHUB_TOKEN": "ghs_secret",
    "OPENAI_API_KEY": "sk-openai",
    "DATABASE_URL": "postgresql://u:p@db/studio",
    "HOME": "/root",
    "CLAUDE_CONFIG_DIR": "/root/.claude",
}


def test_only_allowlisted_names_pass_and_the_switches_are_set() -> None:
    env = claude_env_from(PARENT)
    assert {"STUDIO_GITHUB_TOKEN", "OPENAI_API_KEY", "DATABASE_URL", "HOME",
            "CLAUDE_CONFIG_DIR"}.isdisjoint(env)
    assert env["ANTHROPIC_API_KEY"] == "sk-ant-parent"
    # the API key mode (the default) takes no cloud variable, even when the parent has them
    assert "AWS_REGION" not in env and "CLAUDE_CODE_USE_BEDROCK" not in env
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["DISABLE_AUTOUPDATER"] == "1" and env["DISABLE_TELEMETRY"] == "1"


def test_a_cloud_mode_takes_its_own_variables_and_sets_its_switch() -> None:
    bedrock = claude_env_from(PARENT, auth_mode("claude", "bedrock"))
    assert bedrock["AWS_REGION"] == "eu-west-1" and bedrock["CLAUDE_CODE_USE_BEDROCK"] == "1"
    assert "ANTHROPIC_API_KEY" not in bedrock  # another mode's credential stays behind
    vertex = claude_env_from({**PARENT, "CLOUD_ML_REGION": "europe-west1"},
                             auth_mode("claude", "vertex"))
    assert vertex["CLAUDE_CODE_USE_VERTEX"] == "1" and vertex["CLOUD_ML_REGION"] == "europe-west1"
    assert {"AWS_REGION", "CLAUDE_CODE_USE_BEDROCK", "ANTHROPIC_API_KEY"}.isdisjoint(vertex)


def test_session_env_sets_the_run_directories_and_explicit_settings(tmp_path: Path) -> None:
    env = session_env(PARENT, config_dir=tmp_path / "c", home=tmp_path / "h",
                      api_key="sk-explicit", base_url="http://127.0.0.1:9", max_retries=2)
    assert env["ANTHROPIC_API_KEY"] == "sk-explicit"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
    assert env["CLAUDE_CONFIG_DIR"] == str(tmp_path / "c") and env["HOME"] == str(tmp_path / "h")
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    assert "STUDIO_GITHUB_TOKEN" not in env


def test_session_env_without_path_gets_a_default(tmp_path: Path) -> None:
    env = session_env({}, config_dir=tmp_path, home=tmp_path, api_key=None, base_url=None,
                      max_retries=0)
    assert env["PATH"] and "ANTHROPIC_API_KEY" not in env


def test_the_launcher_drops_every_name_it_was_not_given(tmp_path: Path) -> None:
    launcher = write_launcher(tmp_path / "launch", real_cli=Path("/usr/bin/env"),
                              keep=["KEEP_ME"], python=sys.executable)
    parent = {"KEEP_ME": "1", "STUDIO_GITHUB_TOKEN": "ghs_secret",
              "CLAUDE_CODE_ENTRYPOINT": "sdk-py"}
    out = subprocess.run([str(launcher)], env=parent, capture_output=True, text=True, check=True)
    assert sorted(out.stdout.splitlines()) == ["CLAUDE_CODE_ENTRYPOINT=sdk-py", "KEEP_ME=1"]
    assert "CLAUDE_CODE_ENTRYPOINT" in SDK_PROTOCOL_ENV


def test_the_launcher_passes_arguments_through_unchanged(tmp_path: Path) -> None:
    launcher = write_launcher(tmp_path / "launch", real_cli=Path("/bin/echo"), keep=[],
                              python=sys.executable)
    out = subprocess.run([str(launcher), "a b", "--flag=$HOME"], env={}, capture_output=True,
                         text=True, check=True)
    assert out.stdout == "a b --flag=$HOME\n"


def test_an_interpreter_path_with_spaces_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="shebang"):
        write_launcher(tmp_path / "launch", real_cli=Path("/bin/echo"), keep=[],
                       python="/opt/my python/bin/python")


def test_the_bundled_cli_is_where_the_sdk_ships_it() -> None:
    assert bundled_cli_path().name == "claude" and bundled_cli_path().is_file()


def test_claude_tool_names_stay_valid_and_map_back() -> None:
    import re

    from services.execution.providers.claude_tools import allowed_tool_name, local_tool_name

    assert allowed_tool_name("workspace_read_file") == "mcp__studio__workspace_read_file"
    assert allowed_tool_name("mcp__docs__search") == "mcp__studio__docs__search"
    long_name = "mcp__" + "s" * 20 + "__" + "t" * 37  # 64 characters: valid for the others
    shortened = allowed_tool_name(long_name)
    assert len(shortened) <= 64 and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", shortened)
    assert local_tool_name(long_name) != local_tool_name(long_name[:-1] + "u")
