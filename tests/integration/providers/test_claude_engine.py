"""ClaudeEngine through the real Claude Code CLI (bundled with claude-agent-sdk) and the scripted
model server speaking Anthropic Messages over SSE on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from services.execution.errors import ErrorCode, ProviderRejected, ProviderUnavailable
from services.execution.messages import ToolSchema, UsageSemantic
from services.execution.providers.claude import STOP_REASON_CODES, ClaudeConfig, ClaudeEngine
from services.execution.providers.claude_env import bundled_cli_path, claude_env_from
from tests.support.model_server import (
    ScriptedModelServer,
    assert_no_credential_outside_auth,
    error,
    hang,
    text,
    tool_calls,
)

MODEL = "claude-sonnet-4-5"
KEY = "sk-ant-test-KEY-4f1c9e"
PARENT_SECRET = "ghs_parent-secret-7d2a"
READ = ToolSchema(
    name="workspace_read_file",
    description="Read a text file of the workspace.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "offset": {"type": "integer", "default": 1}},
        "required": ["path"],
        "additionalProperties": False,
    },
)
STATUS = ToolSchema(
    name="git_status",
    description="Show the working tree status.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
)
READ_CALL = tool_calls([("mcp__studio__workspace_read_file", {"path": "README.md"})])


class GuardStopForTest(Exception):
    """What the loop's gateway raises when a guard stops the run."""


class RecordingGateway:
    """Stands for the loop's ToolGateway: records each call and answers an envelope."""

    def __init__(self, hook: Callable[[], Awaitable[None]] | None = None,
                 stop_after: int | None = None) -> None:
        self.calls: list[tuple[str | None, str, dict[str, Any]]] = []
        self._hook = hook
        self._stop_after = stop_after

    async def call_tool(
        self, call_id: str | None, name: str, args: dict[str, Any]
    ) -> dict[str, Any]:
        self.calls.append((call_id, name, args))
        if self._hook is not None:
            await self._hook()
        if self._stop_after is not None and len(self.calls) >= self._stop_after:
            raise GuardStopForTest("loop_detected: same call 5 times")
        domain, _, operation = name.partition("_")
        return {"ok": True, "call_id": call_id, "tool_name": name, "domain": domain,
                "operation": operation, "result": {"content": "# Hello\n"}, "duration_ms": 1.0,
                "request_id": "req-1", "correlation_id": "corr-1"}


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, Path]:
    paths = {name: tmp_path / name for name in ("ws", "transcripts", "scratch")}
    paths["ws"].mkdir()
    paths["scratch"].mkdir()
    return paths


def make_engine(
    server: ScriptedModelServer, dirs: dict[str, Path], **overrides: Any
) -> ClaudeEngine:
    config: dict[str, Any] = dict(
        model=MODEL, workspace=dirs["ws"], api_key=KEY, base_url=server.url,
        env=claude_env_from(os.environ), transcript_dir=dirs["transcripts"],
        scratch_dir=dirs["scratch"], max_retries=0,
    )
    config.update(overrides)
    return ClaudeEngine(ClaudeConfig(**config))


def run(engine: ClaudeEngine, gateway: RecordingGateway, *, max_turns: int = 6,
        tools: list[ToolSchema] | None = None) -> Any:
    return asyncio.run(engine.run_session(
        system="You are a test agent.", prompt="Read README.md, then answer.",
        tools=[READ, STATUS] if tools is None else tools, gateway=gateway,
        max_turns=max_turns, max_budget_usd=1.0,
    ))


def test_a_tool_call_reaches_the_gateway_and_its_result_the_model(dirs: dict[str, Path]) -> None:
    gateway = RecordingGateway()
    with ScriptedModelServer([READ_CALL, text("README says hello")]) as server:
        outcome = run(make_engine(server, dirs), gateway)

    sent = server.requests_for("anthropic", "messages")
    assert len(sent) == 2 and not server.unmatched
    # only our tools are declared: Claude Code's built-ins are off, nothing deferred
    declared = {t.name: t for t in server.declared_tools(sent[0])}
    assert set(declared) == {"mcp__studio__workspace_read_file", "mcp__studio__git_status"}
    assert declared["mcp__studio__workspace_read_file"].schema["required"] == ["path"]

    [turn] = server.assistant_tool_turns(sent[1])
    tool_use_id = turn.calls[0].call_id
    assert gateway.calls == [(tool_use_id, "workspace_read_file", {"path": "README.md"})]
    [returned] = server.tool_results(sent[1])
    assert returned.call_id == tool_use_id and not returned.is_error
    envelope = json.loads(returned.content[0]["text"])
    assert envelope["ok"] is True and envelope["result"] == {"content": "# Hello\n"}

    assert outcome.stop_reason == "end_turn" and outcome.turns == 2
    assert outcome.final_text == "README says hello"
    assert outcome.usage.semantic is UsageSemantic.CUMULATIVE
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (200, 40)
    assert outcome.usage.cost_usd is not None and outcome.usage.cost_usd > 0
    transcript = Path(outcome.transcript_path)
    assert transcript.parent == dirs["transcripts"] and tool_use_id in transcript.read_text()
    assert list(dirs["scratch"].iterdir()) == []  # the ephemeral config dir is gone


def test_two_calls_in_one_turn_are_dispatched_in_order(dirs: dict[str, Path]) -> None:
    gateway = RecordingGateway()
    both = tool_calls([("mcp__studio__workspace_read_file", {"path": "a.txt"}),
                       ("mcp__studio__git_status", {})])
    with ScriptedModelServer([both, text("ok")]) as server:
        outcome = run(make_engine(server, dirs), gateway)

    sent = server.requests_for("anthropic")
    [turn] = server.assistant_tool_turns(sent[1])
    ids = [call.call_id for call in turn.calls]
    assert gateway.calls == [(ids[0], "workspace_read_file", {"path": "a.txt"}),
                             (ids[1], "git_status", {})]
    assert [r.call_id for r in server.tool_results(sent[1])] == ids
    assert outcome.stop_reason == "end_turn" and outcome.turns == 2


def test_max_turns_ends_the_session_with_error_max_turns(dirs: dict[str, Path]) -> None:
    gateway = RecordingGateway()
    with ScriptedModelServer([READ_CALL] * 5) as server:
        outcome = run(make_engine(server, dirs), gateway, max_turns=1)

    assert outcome.stop_reason == "error_max_turns" and outcome.turns == 1
    assert STOP_REASON_CODES[outcome.stop_reason] is ErrorCode.MAX_ITERATIONS_EXCEEDED
    assert len(server.requests_for("anthropic")) == 1 and len(gateway.calls) == 1


def test_key_and_base_url_from_the_environment_key_only_in_the_auth_header(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    with ScriptedModelServer([READ_CALL, text("ok")]) as server:
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        engine = make_engine(server, dirs, api_key=None, base_url=None,
                             env=claude_env_from(os.environ))
        outcome = run(engine, RecordingGateway())
    sent = server.requests_for("anthropic")
    assert len(sent) == 2 and outcome.stop_reason == "end_turn"
    for record in sent:
        assert_no_credential_outside_auth(record, KEY)


def _cli_environments(scratch: Path) -> list[dict[str, str]]:
    """Environments of the running bundled CLI processes whose config dir is under ``scratch``."""
    found = []
    real = os.path.realpath(bundled_cli_path())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.path.realpath(entry / "exe") != real:
                continue
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue  # the process ended meanwhile
        env = dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
        if env.get("CLAUDE_CONFIG_DIR", "").startswith(str(scratch)):
            found.append(env)
    return found


def test_the_cli_sees_only_the_allowlisted_environment(
    dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STUDIO_GITHUB_TOKEN", PARENT_SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-parent")
    seen: list[list[dict[str, str]]] = []

    async def look() -> None:
        seen.append(_cli_environments(dirs["scratch"]))

    with ScriptedModelServer([READ_CALL, text("ok")]) as server:
        url = server.url
        run(make_engine(server, dirs), RecordingGateway(hook=look))

    [[env]] = seen
    assert "STUDIO_GITHUB_TOKEN" not in env and "OPENAI_API_KEY" not in env
    assert PARENT_SECRET not in json.dumps(env)
    assert env["ANTHROPIC_API_KEY"] == KEY and env["ANTHROPIC_BASE_URL"] == url
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "0"
    assert env["HOME"].startswith(str(dirs["scratch"]))


def test_a_gateway_stop_interrupts_the_session_and_is_raised(dirs: dict[str, Path]) -> None:
    gateway = RecordingGateway(stop_after=1)
    with ScriptedModelServer([READ_CALL] * 5) as server:
        engine = make_engine(server, dirs)
        with pytest.raises(GuardStopForTest):
            run(engine, gateway)
    assert len(gateway.calls) == 1
    assert engine.last_outcome is not None and engine.last_outcome.stop_reason == "interrupted"
    assert engine.last_outcome.transcript_path is not None


def test_interrupt_from_outside_ends_a_hanging_session(dirs: dict[str, Path]) -> None:
    with ScriptedModelServer([hang(30)]) as server:
        engine = make_engine(server, dirs)

        async def interrupt_when_asked() -> None:
            while not server.requests:
                await asyncio.sleep(0.01)
            await engine.interrupt()

        async def main() -> Any:
            task = asyncio.create_task(interrupt_when_asked())
            outcome = await engine.run_session(
                system="s", prompt="p", tools=[READ], gateway=RecordingGateway(),
                max_turns=3, max_budget_usd=1.0)
            await task
            return outcome

        outcome = asyncio.run(main())
    assert outcome.stop_reason == "interrupted"
    assert STOP_REASON_CODES[outcome.stop_reason] is ErrorCode.INTERRUPTED


def test_an_overloaded_api_becomes_provider_unavailable_after_bounded_retries(
    dirs: dict[str, Path],
) -> None:
    with (
        ScriptedModelServer([error(529)] * 4) as server,
        pytest.raises(ProviderUnavailable) as raised,
    ):
        run(make_engine(server, dirs, max_retries=1), RecordingGateway())
    assert raised.value.details["status"] == 529 and raised.value.retryable is False
    assert server.attempts(0) == 2  # one try plus CLAUDE_CODE_MAX_RETRIES=1


def test_a_refused_key_becomes_provider_rejected(dirs: dict[str, Path]) -> None:
    with ScriptedModelServer([error(401)]) as server, pytest.raises(ProviderRejected) as raised:
        run(make_engine(server, dirs), RecordingGateway())
    assert raised.value.code is ErrorCode.PROVIDER_REJECTED
    assert raised.value.details["status"] == 401
