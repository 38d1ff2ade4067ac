"""The Codex and Gemini CLI adapters of the legacy runtime: argv (project configuration off, the
provider on the command line), environment (the provider key only) and their stream parsers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.execution.legacy.cli import (
    CliRequest,
    ModelTurn,
    SessionEnd,
    ToolOutput,
    UsageReport,
)
from services.execution.legacy.codex_cli import CodexCli
from services.execution.legacy.gemini_cli import GeminiCli

ENV = {"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
       "GEMINI_API_KEY": "g-k", "GOOGLE_GEMINI_BASE_URL": "http://127.0.0.1:9",
       "ANTHROPIC_API_KEY": "sk-a", "STUDIO_GITHUB_TOKEN": "ghs_secret",
       "STUDIO_DATABASE_URL": "postgresql://u:p@h/db", "PATH": "/opt/evil:/usr/bin"}
REQUEST = CliRequest(prompt="fix it", model="m", max_turns=5, max_budget_usd=1.0,
                     home=Path("/tmp/home"), endpoint="http://127.0.0.1:8080/v1",
                     token="studio-tok")


def test_codex_argv_never_trusts_the_project_and_names_its_provider() -> None:
    argv = CodexCli(Path("/x/codex"), ENV).argv(REQUEST, sandboxed=True)
    assert argv[1:3] == ["exec", "--json"] and "--trust" not in argv
    assert {"--ephemeral", "--ignore-user-config", "--ignore-rules"} <= set(argv)
    assert "--dangerously-bypass-approvals-and-sandbox" in argv
    assert any('base_url="http://127.0.0.1:8080/v1"' in a for a in argv)
    assert not any("127.0.0.1:9" in a or "sk-o" in a for a in argv)
    assert 'shell_environment_policy.inherit="core"' in argv
    unconfined = CodexCli(Path("/x/codex"), ENV).argv(REQUEST, sandboxed=False)
    assert "--dangerously-bypass-approvals-and-sandbox" not in unconfined
    assert unconfined[unconfined.index("--sandbox") + 1] == "workspace-write"


@pytest.mark.parametrize("cli,key", [(CodexCli(Path("/x/codex"), ENV), "OPENAI_API_KEY"),
                                     (GeminiCli(Path("/x/gemini"), ENV), "GEMINI_API_KEY")])
def test_the_environment_holds_only_the_proxy_token(cli: CodexCli | GeminiCli, key: str) -> None:
    env = cli.env(REQUEST)
    assert env[key] == "studio-tok" and env["HOME"] == "/tmp/home"
    assert "/opt/evil" not in env["PATH"]
    assert ENV[key] not in json.dumps(env)  # the key stays with the harness's proxy
    assert cli.model_route().value.endswith(ENV[key])
    secrets = {"STUDIO_GITHUB_TOKEN", "STUDIO_DATABASE_URL", "ANTHROPIC_API_KEY"}
    assert not secrets & set(env)
    other = {"OPENAI_API_KEY", "GEMINI_API_KEY"} - {key}
    assert not other & set(env)


def test_codex_events_become_calls_outputs_usage_and_the_end() -> None:
    cli = CodexCli(Path("/x/codex"), ENV)
    started = cli.parse(json.dumps({"type": "item.started", "item": {
        "id": "i1", "type": "command_execution", "command": "ls", "status": "in_progress"}}))
    assert isinstance(started[0], ModelTurn) and started[0].tool_calls[0].name == \
        "command_execution"
    done = cli.parse(json.dumps({"type": "item.completed", "item": {
        "id": "i1", "type": "command_execution", "command": "ls", "aggregated_output": "a\n",
        "exit_code": 0, "status": "completed"}}))
    assert done == [ToolOutput("i1", "a\n\n[exit code 0]", False)]
    message = cli.parse(json.dumps({"type": "item.completed", "item": {
        "id": "i2", "type": "agent_message", "text": "{}"}}))
    assert isinstance(message[0], ModelTurn) and message[0].text == "{}"
    end = cli.parse(json.dumps({"type": "turn.completed", "usage": {
        "input_tokens": 7, "output_tokens": 3, "cached_input_tokens": 1}}))
    assert isinstance(end[0], UsageReport) and end[0].usage.input_tokens == 7
    assert isinstance(end[1], SessionEnd) and end[1].subtype == "success"
    failed = cli.parse(json.dumps({"type": "turn.failed", "error": {"message": "boom"}}))
    assert isinstance(failed[0], SessionEnd) and failed[0].details == {"error": "boom"}
    with pytest.raises(ValueError):
        cli.parse("garbage")


def test_gemini_hides_its_workspace_config_and_caps_turns_in_private_settings() -> None:
    cli = GeminiCli(Path("/x/gemini"), ENV)
    assert cli.hidden == (".gemini",)
    settings = json.loads(cli.home_files(REQUEST)[".gemini/settings.json"])
    assert settings["model"]["maxSessionTurns"] == REQUEST.max_turns + 1
    assert settings["telemetry"]["enabled"] is False
    argv = cli.argv(REQUEST, sandboxed=True)
    assert argv[argv.index("-o") + 1] == "stream-json"


def test_gemini_deltas_join_into_turns_and_the_result_carries_usage() -> None:
    cli = GeminiCli(Path("/x/gemini"), ENV)
    assert cli.parse(json.dumps({"type": "message", "role": "assistant", "content": "Le",
                                 "delta": True})) == []
    call = cli.parse(json.dumps({"type": "tool_use", "tool_name": "run_shell_command",
                                 "tool_id": "t1", "parameters": {"command": "ls"}}))
    assert isinstance(call[0], ModelTurn) and call[0].text == "Le"
    second = cli.parse(json.dumps({"type": "tool_use", "tool_name": "read_file",
                                   "tool_id": "t2", "parameters": {}}))
    assert isinstance(second[0], ModelTurn)
    assert second[0].message_id == call[0].message_id  # one model response, two calls
    out = cli.parse(json.dumps({"type": "tool_result", "tool_id": "t1", "status": "error",
                                "error": {"message": "no"}}))
    assert isinstance(out[0], ToolOutput) and out[0].is_error
    cli.parse(json.dumps({"type": "message", "role": "assistant", "content": "{}"}))
    end = cli.parse(json.dumps({"type": "result", "status": "success", "stats": {
        "input_tokens": 5, "output_tokens": 2, "cached": 0}}))
    assert [type(i) for i in end] == [ModelTurn, UsageReport, SessionEnd]
    assert isinstance(end[2], SessionEnd) and end[2].final_text == "{}"


def test_gemini_ignores_the_repository_env_file_and_pins_its_routing_variables() -> None:
    cli = GeminiCli(Path("/x/gemini"), ENV)
    settings = json.loads(cli.home_files(REQUEST)[".gemini/settings.json"])
    assert settings["advanced"]["ignoreLocalEnv"] is True
    env = cli.env(REQUEST)
    assert env["GOOGLE_GEMINI_BASE_URL"] == "http://127.0.0.1:8080/v1"
    for name in ("GOOGLE_API_KEY", "HTTPS_PROXY", "https_proxy", "GOOGLE_GENAI_USE_VERTEXAI"):
        assert env[name] == ""  # present, so no .env fills it
