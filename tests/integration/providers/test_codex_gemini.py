"""The codex and gemini adapters through the real ``openai`` and ``google-genai`` SDKs, over real
HTTP, against the scripted model server (tests/support/model_server.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
from collections.abc import Iterator
from typing import Any

import pytest

from services.execution.errors import ProviderRejected, ProviderUnavailable
from services.execution.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TextPart,
    ToolResultPart,
    ToolSchema,
)
from services.execution.ports import ModelClient
from services.execution.providers.codex import CodexClient
from services.execution.providers.gemini import GeminiClient
from services.execution.tool_domains.registry import default_registry
from tests.support.model_server import (
    ScriptedModelServer,
    assert_no_credential_outside_auth,
    assert_tool_names_valid,
    check_tool_schema,
    error,
    hang,
    text,
    tool_calls,
)

API_KEY = "sk-test-SECRET-key-0123456789"
MODES = ["responses", "chat", "gemini"]
TOOLS = [ToolSchema(name=s.name, description=s.description, parameters=s.neutral_schema())
         for s in default_registry().specs()]
# what a strict OpenAI model sends for command_run: every property, nulls, env as pairs
STRICT_RUN_ARGS = {"argv": None, "command": "echo $A", "cwd": None, "timeout_s": None,
                   "env": [{"name": "A", "value": "1"}]}
GEMINI_RUN_ARGS = {"command": "echo $A", "env": [{"name": "A", "value": "1"}]}
NEUTRAL_RUN_ARGS = {"command": "echo $A", "env": {"A": "1"}}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI",
                 "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer() as srv:
        yield srv


def make_client(mode: str, base: str | None, **kwargs: Any) -> ModelClient:
    if mode == "gemini":
        return GeminiClient(model="gemini-2.5-pro", api_key=API_KEY, base_url=base, **kwargs)
    url = None if base is None else base + "/v1"
    return CodexClient(model="gpt-5.1", api_key=API_KEY, base_url=url,
                       mode="chat" if mode == "chat" else "responses", **kwargs)


def request(messages: list[Message], cycle: int = 0) -> ModelRequest:
    return ModelRequest(system="You are a coding agent.", messages=messages, tools=TOOLS,
                        cycle=cycle)


def complete(client: ModelClient, req: ModelRequest) -> ModelResponse:
    async def run() -> ModelResponse:
        try:
            return await client.complete(req)
        finally:
            await client.aclose()
    return asyncio.run(run())


def converse(client: ModelClient, turns: int) -> list[ModelResponse]:
    """``turns`` model calls on one client, answering every tool call with an ok envelope."""
    async def run() -> list[ModelResponse]:
        history = [Message(role=Role.USER, parts=[TextPart(text="Run the tests.")])]
        responses = []
        try:
            for cycle in range(turns):
                response = await client.complete(request(history, cycle))
                responses.append(response)
                history.append(response.message)
                results = [ToolResultPart(call_id=c.call_id, tool_name=c.tool_name,
                                          envelope={"ok": True, "result": {"cycle": cycle}})
                           for c in response.message.tool_calls]
                if results:
                    history.append(Message(role=Role.TOOL, parts=list(results)))
        finally:
            await client.aclose()
        return responses
    return asyncio.run(run())


def run_args(mode: str) -> dict[str, Any]:
    return GEMINI_RUN_ARGS if mode == "gemini" else STRICT_RUN_ARGS


def vendor(mode: str) -> str:
    return "gemini" if mode == "gemini" else "openai"


# --- a tool call round trip -----------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_tool_call_round_trip(server: ScriptedModelServer, mode: str) -> None:
    server.extend([tool_calls([("command_run", run_args(mode)), ("git_status", {})]),
                   text("All green.")])
    first, second = converse(make_client(mode, server.url), 2)

    calls = first.message.tool_calls
    assert [c.tool_name for c in calls] == ["command_run", "git_status"]
    assert (calls[0].domain, calls[0].operation, calls[0].args) == ("command", "run",
                                                                    NEUTRAL_RUN_ARGS)
    assert first.stop_reason == "tool_calls"
    assert second.message.text == "All green." and not second.message.tool_calls
    assert first.usage.input_tokens == 100 and first.usage.output_tokens == 20

    requests = [r for r in server.requests if r.vendor == vendor(mode)]
    assert len(requests) == 2 and not server.unmatched
    echoed = ScriptedModelServer.assistant_tool_turns(requests[1])
    assert [c.name for c in echoed[0].calls] == ["command_run", "git_status"]
    results = ScriptedModelServer.tool_results(requests[1])
    assert len(results) == 2
    if mode == "gemini":  # no provider ids: `<cycle>-<index>` here, nothing sent back
        assert [c.call_id for c in calls] == ["0-0", "0-1"]
        assert [r.name for r in results] == ["command_run", "git_status"]
        assert results[0].content == {"ok": True, "result": {"cycle": 0}}
    else:
        assert [r.call_id for r in results] == [c.call_id for c in calls]
        assert json.loads(results[0].content) == {"ok": True, "result": {"cycle": 0}}
        assert echoed[0].calls[0].call_id == calls[0].call_id


def test_gemini_call_ids_are_echoed(server: ScriptedModelServer) -> None:
    server.extend([tool_calls([("git_status", {})], gemini_call_ids=True), text("ok")])
    first, _ = converse(make_client("gemini", server.url), 2)
    [call] = first.message.tool_calls
    assert not call.call_id.startswith("0-")
    [result] = ScriptedModelServer.tool_results(server.requests[1])
    assert result.call_id == call.call_id
    assert ScriptedModelServer.assistant_tool_turns(server.requests[1])[0].calls[0].call_id == (
        call.call_id)


def test_gemini_thought_signature_is_sent_back(server: ScriptedModelServer) -> None:
    signature = b"\x00opaque-signature\xff"
    server.extend([tool_calls([("git_status", {}), ("git_log", {})],
                              thought_signature=signature), text("ok")])
    first, _ = converse(make_client("gemini", server.url), 2)
    assert first.message.parts[0].provider_meta["thought_signature"] == (  # type: ignore[union-attr]
        base64.b64encode(signature).decode())
    [turn] = ScriptedModelServer.assistant_tool_turns(server.requests[1])
    assert turn.calls[0].thought_signature == base64.b64encode(signature).decode()
    assert turn.calls[1].thought_signature is None


@pytest.mark.parametrize("mode", MODES)
def test_declared_tool_schemas_pass_vendor_checks(server: ScriptedModelServer, mode: str) -> None:
    server.extend([text("hi")])
    complete(make_client(mode, server.url), request([Message(role=Role.USER,
                                                             parts=[TextPart(text="hi")])]))
    [record] = server.requests
    assert_tool_names_valid(record)
    declared = ScriptedModelServer.declared_tools(record)
    assert {d.name for d in declared} == {t.name for t in TOOLS}
    for tool in declared:
        assert check_tool_schema(vendor(mode), tool.schema) == [], tool.name
        if mode != "gemini":
            assert tool.strict is True
    if mode == "gemini":
        assert {d.schema_field for d in declared} == {"parametersJsonSchema"}
        assert record.body["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}
        assert record.body["systemInstruction"]["parts"][0]["text"] == "You are a coding agent."
    elif mode == "responses":
        assert record.body["store"] is False and record.body["parallel_tool_calls"] is True
        assert record.body["instructions"] == "You are a coding agent."


@pytest.mark.parametrize("mode", MODES)
def test_each_message_is_converted_once(server: ScriptedModelServer, mode: str) -> None:
    """The per-turn cost stays flat: earlier messages are not converted again."""
    server.extend([tool_calls([("git_status", {})]) for _ in range(6)] + [text("done")])
    client = make_client(mode, server.url)
    responses = converse(client, 7)
    assert responses[-1].message.text == "done"
    # 1 user message + 6 x (assistant turn + tool results); the final answer is never sent
    assert client.wire_conversions == 13  # type: ignore[attr-defined]
    last = server.requests[-1]
    assert len(ScriptedModelServer.tool_results(last)) == 6


# --- errors, retries off --------------------------------------------------------------------


def _hello() -> ModelRequest:
    return request([Message(role=Role.USER, parts=[TextPart(text="hello")])])


@pytest.mark.parametrize("mode", MODES)
def test_500_is_unavailable_after_exactly_one_attempt(server: ScriptedModelServer,
                                                      mode: str) -> None:
    server.extend([error(500), text("never reached")])
    with pytest.raises(ProviderUnavailable) as info:
        complete(make_client(mode, server.url), _hello())
    assert info.value.retryable and info.value.details["status"] == 500
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_429_carries_retry_after(server: ScriptedModelServer, mode: str) -> None:
    server.extend([error(429, headers={"Retry-After": "7"})])
    with pytest.raises(ProviderUnavailable) as info:
        complete(make_client(mode, server.url), _hello())
    assert info.value.details["retry_after"] == 7.0
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_are_rejected(server: ScriptedModelServer, mode: str, status: int) -> None:
    server.extend([error(status, body={"error": {
        "code": status, "message": f"bad request, key {API_KEY}", "status": "INVALID_ARGUMENT"}})])
    with pytest.raises(ProviderRejected) as info:
        complete(make_client(mode, server.url), _hello())
    assert not info.value.retryable
    assert f"HTTP {status}" in str(info.value) and "bad request" in str(info.value)
    assert API_KEY not in str(info.value)
    assert len(server.requests) == 1


@pytest.mark.parametrize("mode", MODES)
def test_connection_refused_is_unavailable(mode: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ProviderUnavailable):  # nothing listens on the port any more
        complete(make_client(mode, f"http://127.0.0.1:{port}"), _hello())


@pytest.mark.parametrize("mode", MODES)
def test_timeout_is_unavailable(server: ScriptedModelServer, mode: str) -> None:
    server.extend([hang(30)])
    with pytest.raises(ProviderUnavailable):
        complete(make_client(mode, server.url, timeout_s=0.5), _hello())
    assert len(server.requests) == 1


# --- credentials and base URL ---------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_api_key_only_in_the_auth_header(server: ScriptedModelServer, mode: str) -> None:
    server.extend([tool_calls([("git_status", {})]), text("ok")])
    converse(make_client(mode, server.url), 2)
    assert len(server.requests) == 2
    for record in server.requests:
        assert_no_credential_outside_auth(record, API_KEY)


@pytest.mark.parametrize("mode", MODES)
def test_base_url_from_the_sdk_environment_variable(
    server: ScriptedModelServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if mode == "gemini":
        monkeypatch.setenv("GOOGLE_GEMINI_BASE_URL", server.url)
    else:
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.extend([text("from env")])
    response = complete(make_client(mode, None), _hello())
    assert response.message.text == "from env"
    [record] = server.requests
    expected: dict[str, str] = {"responses": "/v1/responses", "chat": "/v1/chat/completions",
                                "gemini": "/v1/models/gemini-2.5-pro:generateContent"}
    assert record.path == expected[mode]
