"""The Claude Code adapter of the legacy runtime: its argv, its environment, its stream parser,
and the confinement argv (the CLI gets no network of its own, its home is bound)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.execution.errors import ErrorCode, ExecutionError
from services.execution.legacy.claude_code import ClaudeCodeCli
from services.execution.legacy.cli import CliRequest, ModelTurn, SessionEnd, ToolOutput
from services.execution.legacy.process import confine
from services.execution.providers.cloud_auth import auth_mode
from services.execution.sandbox.selection import BwrapSandbox, NoSandbox

ENV = {"ANTHROPIC_API_KEY": "sk-k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
       "STUDIO_GITHUB_TOKEN": "ghs_secret", "STUDIO_DATABASE_URL": "postgresql://u:p@h/db",
       "OPENAI_API_KEY": "sk-other", "PATH": "/usr/bin:/bin"}
REQUEST = CliRequest(prompt="fix it", model="claude-sonnet-4-5", max_turns=7,
                     max_budget_usd=1.5, home=Path("/tmp/home"),
                     endpoint="http://127.0.0.1:8080", token="studio-tok")


def test_the_argv_turns_every_project_source_off_and_sets_the_limits() -> None:
    argv = ClaudeCodeCli(Path("/opt/claude"), ENV).argv(REQUEST, sandboxed=True)
    assert argv[:3] == ["/opt/claude", "-p", "fix it"]
    pairs = dict(zip(argv, argv[1:], strict=False))
    assert pairs["--setting-sources"] == "" and "--strict-mcp-config" in argv
    assert "--mcp-config" not in argv and "--disable-slash-commands" in argv
    assert pairs["--max-turns"] == "7" and pairs["--max-budget-usd"] == "1.5000"
    assert pairs["--output-format"] == "stream-json" and pairs["--permission-mode"] == "acceptEdits"
    assert "--dangerously-skip-permissions" not in argv


def test_the_environment_holds_the_proxy_and_its_token_never_the_key() -> None:
    cli = ClaudeCodeCli(Path("/opt/claude"), ENV)
    env = cli.env(REQUEST)
    assert env["ANTHROPIC_API_KEY"] == "studio-tok"
    assert env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
    assert env["HOME"] == "/tmp/home" and env["CLAUDE_CONFIG_DIR"] == "/tmp/home/.claude"
    assert not {"STUDIO_GITHUB_TOKEN", "STUDIO_DATABASE_URL", "OPENAI_API_KEY"} & set(env)
    assert "sk-k" not in json.dumps(env)
    route = cli.model_route()  # the key stays with the harness's proxy
    assert (route.upstream, route.header, route.value) == ("http://127.0.0.1:9", "x-api-key",
                                                           "sk-k")
    assert "sk-k" not in repr(route)


def test_an_auth_token_deployment_sends_the_token_as_a_bearer() -> None:
    env = {"ANTHROPIC_AUTH_TOKEN": "tok-123456"}
    cli = ClaudeCodeCli(Path("/opt/claude"), env)
    assert cli.env(REQUEST)["ANTHROPIC_AUTH_TOKEN"] == "studio-tok"
    route = cli.model_route()
    assert (route.header, route.value) == ("authorization", "Bearer tok-123456")
    assert route.upstream == "https://api.anthropic.com"


def test_a_cloud_auth_mode_is_refused_in_the_legacy_runtime() -> None:
    cli = ClaudeCodeCli(Path("/opt/claude"), ENV, auth_mode("claude", "bedrock"))
    with pytest.raises(ExecutionError) as info:
        cli.model_route()
    assert info.value.code is ErrorCode.UNSUPPORTED_CAPABILITY


def test_the_stream_becomes_turns_tool_outputs_and_the_end() -> None:
    cli = ClaudeCodeCli(Path("/opt/claude"), ENV)
    turn = cli.parse(json.dumps({"type": "assistant", "message": {
        "id": "m1", "model": "claude-sonnet-4-5", "usage": {"input_tokens": 10,
                                                           "output_tokens": 2},
        "content": [{"type": "text", "text": "look"},
                    {"type": "tool_use", "id": "c1", "name": "Bash",
                     "input": {"command": "ls"}}]}}))
    assert isinstance(turn[0], ModelTurn) and turn[0].tool_calls[0].name == "Bash"
    assert turn[0].usage is not None and turn[0].usage.input_tokens == 10
    out = cli.parse(json.dumps({"type": "user", "message": {"content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": [{"type": "text", "text": "a"}],
         "is_error": False}]}}))
    assert out == [ToolOutput("c1", "a", False)]
    end = cli.parse(json.dumps({"type": "result", "subtype": "success", "result": "{}",
                                "num_turns": 2, "total_cost_usd": 0.01}))
    assert isinstance(end[0], SessionEnd) and end[0].turns == 2
    assert cli.parse(json.dumps({"type": "system", "subtype": "init"})) == []
    for garbage in ("not json", "[1, 2]", json.dumps({"no": "type"})):
        with pytest.raises(ValueError):
            cli.parse(garbage)


def test_bubblewrap_shares_no_network_and_binds_the_home(tmp_path: Path) -> None:
    workspace, home = tmp_path / "ws", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    (workspace / ".git").mkdir()
    prepared = confine(BwrapSandbox("bwrap"), ["/usr/bin/true"], {"PATH": "/usr/bin"},
                       workspace=workspace, home=home)
    argv = prepared.argv
    prepared.close_fds()
    assert "--unshare-all" in argv and "--share-net" not in argv
    at = argv.index("--bind", argv.index("--ro-bind", argv.index(str(workspace / ".git"))))
    assert argv[at:at + 3] == ["--bind", str(home), "/tmp/home"]


def test_landlock_is_refused_and_none_runs_unconfined(tmp_path: Path) -> None:
    class Landlock(NoSandbox):
        @property
        def mode(self) -> str:
            return "landlock"

    with pytest.raises(ExecutionError) as info:
        confine(Landlock(), ["/usr/bin/true"], {}, workspace=tmp_path, home=tmp_path)
    assert info.value.code is ErrorCode.SANDBOX_UNAVAILABLE
    plain = confine(NoSandbox(), ["/usr/bin/true"], {"A": "1"}, workspace=tmp_path,
                    home=tmp_path)
    assert plain.argv == ["/usr/bin/true"] and plain.env == {"A": "1"}
    assert plain.preexec is not None  # the CLI dies with the harness
