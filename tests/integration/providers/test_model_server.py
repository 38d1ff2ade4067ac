"""The scripted model server against the real SDKs: openai, google-genai and the Claude Code CLI."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import openai
import pytest
from claude_agent_sdk import (
    ClaudeAgentOptions,
    ResultMessage,
    create_sdk_mcp_server,
    query,
    tool,
)
from google import genai
from google.genai import types as gtypes

from tests.support.model_server import (
    RequestRecord,
    ScriptedModelServer,
    Step,
    ToolCalls,
    Usage,
    assert_no_credential_outside_auth,
    assert_tool_names_valid,
    check_tool_schema,
    error,
    hang,
    text,
    tool_calls,
)

KEY = "sk-test-SECRET-4242"
STRICT_SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
    "required": ["path", "limit"],
    "additionalProperties": False,
}


def call_first_declared(record: RequestRecord) -> ToolCalls:
    """A step that calls the first tool the client declared, whatever its name."""
    name = ScriptedModelServer.declared_tools(record)[0].name
    return tool_calls([(name, {"path": "README.md", "limit": 5})])


def openai_client(server: ScriptedModelServer, **kwargs: Any) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=server.url + "/v1",
                         _strict_response_validation=True, **kwargs)


def test_openai_responses_tool_round_trip() -> None:
    usage = Usage(input_tokens=1000, output_tokens=50, cached_tokens=400, reasoning_tokens=7)
    fn_tool: Any = {"type": "function", "name": "workspace_read_file", "description": "Read",
                    "parameters": STRICT_SCHEMA, "strict": True}
    with ScriptedModelServer([call_first_declared, text("it says hi", usage=usage)]) as server, \
            openai_client(server, max_retries=0) as client:
        first = client.responses.create(model="gpt-5", input="read it", tools=[fn_tool])
        call = first.output[0]
        assert call.type == "function_call"
        assert (call.name, call.call_id) == ("workspace_read_file", "call_1")
        assert json.loads(call.arguments) == {"path": "README.md", "limit": 5}
        history: Any = [{"role": "user", "content": "read it"}, call.model_dump(exclude_none=True),
                        {"type": "function_call_output", "call_id": call.call_id, "output": "hi"}]
        second = client.responses.create(model="gpt-5", input=history, tools=[fn_tool])

    assert second.output_text == "it says hi"
    assert second.usage is not None
    assert second.usage.input_tokens_details.cached_tokens == 400
    assert second.usage.output_tokens_details.reasoning_tokens == 7
    assert second.usage.total_tokens == 1050
    sent = server.requests_for("openai", "responses")
    assert [(r.turn, r.attempt) for r in sent] == [(0, 1), (1, 1)]
    assert [(t.call_id, t.content) for t in server.tool_results(sent[1])] == [("call_1", "hi")]
    [turn] = server.assistant_tool_turns(sent[1])
    assert [(c.name, c.call_id) for c in turn.calls] == [("workspace_read_file", "call_1")]
    for record in sent:
        assert_no_credential_outside_auth(record, KEY)
        assert_tool_names_valid(record)
        assert check_tool_schema("openai", server.declared_tools(record)[0].schema) == []


def test_openai_chat_completions_round_trip() -> None:
    fn_tool: Any = {"type": "function", "function": {"name": "git_status", "parameters": {
        "type": "object", "properties": {}, "additionalProperties": False}}}
    with ScriptedModelServer([tool_calls([("git_status", {})], text="checking"),
                              text("clean")]) as server, \
            openai_client(server, max_retries=0) as client:
        messages: Any = [{"role": "user", "content": "status?"}]
        first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=[fn_tool])
        choice = first.choices[0]
        assert choice.finish_reason == "tool_calls"
        assert choice.message.content == "checking"
        [call] = choice.message.tool_calls or []
        assert call.type == "function"
        assert (call.id, call.function.name, call.function.arguments) == ("call_1", "git_status",
                                                                          "{}")
        messages += [choice.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": "nothing to commit"}]
        second = client.chat.completions.create(model="gpt-4o", messages=messages, tools=[fn_tool])

    assert second.choices[0].message.content == "clean"
    assert second.choices[0].finish_reason == "stop"
    assert second.usage is not None and second.usage.prompt_tokens == 100
    last = server.requests_for("openai", "chat")[-1]
    assert [(t.call_id, t.content) for t in server.tool_results(last)] == [
        ("call_1", "nothing to commit")]
    assert server.assistant_tool_turns(last)[0].calls[0].name == "git_status"
    assert server.declared_tools(last)[0].name == "git_status"
    assert_no_credential_outside_auth(last, KEY)


def test_openai_500_then_success_is_two_attempts_of_one_turn() -> None:
    with ScriptedModelServer([error(500), text("recovered")]) as server, \
            openai_client(server, max_retries=0) as client:
        with pytest.raises(openai.InternalServerError):
            client.responses.create(model="gpt-5", input="hi")
        answer = client.responses.create(model="gpt-5", input="hi")
    assert answer.output_text == "recovered"
    assert server.attempts(0) == 2
    assert [(r.turn, r.attempt, r.step_index) for r in server.requests] == [(0, 1, 0), (0, 2, 1)]


def test_openai_sdk_retries_a_429_carrying_retry_after() -> None:
    limited = error(429, headers={"Retry-After": "1", "retry-after-ms": "10"})
    with ScriptedModelServer([limited, text("ok")]) as server, \
            openai_client(server, max_retries=1) as client:
        answer = client.responses.create(model="gpt-5", input="hi")
    assert answer.output_text == "ok"
    assert server.attempts(0) == 2
    assert [r.headers.get("x-stainless-retry-count") for r in server.requests] == ["0", "1"]


def test_hang_lets_the_client_time_out_and_the_server_still_stops() -> None:
    with ScriptedModelServer([hang(30)]) as server, \
            openai_client(server, max_retries=0, timeout=0.3) as client:
        with pytest.raises(openai.APITimeoutError):
            client.responses.create(model="gpt-5", input="hi")
        assert server.attempts(0) == 1


def gemini_config(declaration: gtypes.FunctionDeclaration) -> gtypes.GenerateContentConfig:
    return gtypes.GenerateContentConfig(
        tools=[gtypes.Tool(function_declarations=[declaration])],
        automatic_function_calling=gtypes.AutomaticFunctionCallingConfig(disable=True),
    )


WEATHER = gtypes.FunctionDeclaration(
    name="get_weather", description="Weather for a city",
    parameters_json_schema={"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]},
)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_gemini_function_call_round_trip_echoes_thought_signature(stream: bool) -> None:
    script: list[Step] = [
        tool_calls([("get_weather", {"city": "Paris"})], thought_signature=b"sig-1"),
        text("sunny, 21 C"),
    ]
    config = gemini_config(WEATHER)
    with ScriptedModelServer(script) as server, genai.Client(
            api_key=KEY, http_options=gtypes.HttpOptions(base_url=server.url)) as client:
        def ask(contents: Any) -> gtypes.GenerateContentResponse:
            if not stream:
                return client.models.generate_content(
                    model="gemini-2.5-flash", contents=contents, config=config)
            chunks = list(client.models.generate_content_stream(
                model="gemini-2.5-flash", contents=contents, config=config))
            assert chunks[-1].usage_metadata is not None
            return chunks[-1] if len(chunks) == 1 else _merge(chunks)

        user = gtypes.Content(role="user", parts=[gtypes.Part(text="weather in Paris?")])
        first = ask([user])
        [call] = first.function_calls or []
        assert (call.name, call.args) == ("get_weather", {"city": "Paris"})
        model_turn = first.candidates[0].content if first.candidates else None
        assert model_turn is not None and model_turn.parts
        assert model_turn.parts[0].thought_signature == b"sig-1"
        reply = gtypes.Content(role="user", parts=[gtypes.Part.from_function_response(
            name="get_weather", response={"temp_c": 21})])
        second = ask([user, model_turn, reply])

    assert second.text == "sunny, 21 C"
    api = "streamGenerateContent" if stream else "generateContent"
    sent = server.requests_for("gemini", api)
    assert len(sent) == 2 and all(r.model == "gemini-2.5-flash" for r in sent)
    assert all(r.query == ("alt=sse" if stream else "") for r in sent)
    [echo] = server.assistant_tool_turns(sent[1])[0].calls
    assert echo.thought_signature == base64.b64encode(b"sig-1").decode()
    assert [(t.name, t.content) for t in server.tool_results(sent[1])] == [
        ("get_weather", {"temp_c": 21})]
    [declared] = server.declared_tools(sent[0])
    assert declared.schema_field == "parameters_json_schema"  # the SDK's own spelling on the wire
    assert check_tool_schema("gemini", declared.schema) == []
    for record in sent:
        assert_no_credential_outside_auth(record, KEY)


def _merge(chunks: list[gtypes.GenerateContentResponse]) -> gtypes.GenerateContentResponse:
    """The streamed chunks as one response (parts concatenated, the last chunk's metadata)."""
    parts = [p for c in chunks if c.candidates and c.candidates[0].content
             for p in c.candidates[0].content.parts or []]
    return gtypes.GenerateContentResponse(
        candidates=[gtypes.Candidate(content=gtypes.Content(role="model", parts=parts))],
        usage_metadata=chunks[-1].usage_metadata)


def test_claude_code_cli_calls_an_sdk_mcp_tool(tmp_path: Path) -> None:
    ran: list[dict[str, Any]] = []

    @tool("add", "Add two integers", {"a": int, "b": int})
    async def add(args: dict[str, Any]) -> dict[str, Any]:
        ran.append(args)
        return {"content": [{"type": "text", "text": str(args["a"] + args["b"])}]}

    def call_add(record: RequestRecord) -> ToolCalls:
        names = [t.name for t in ScriptedModelServer.declared_tools(record)]
        assert names == ["mcp__calc__add"]  # tools=[] leaves only the MCP tool
        return tool_calls([(names[0], {"a": 2, "b": 3})])

    config_dir = tmp_path / "claude-config"
    config_dir.mkdir()
    with ScriptedModelServer([call_add, text("2 + 3 = 5")]) as server:
        options = ClaudeAgentOptions(
            model="claude-sonnet-4-5", tools=[], setting_sources=[], cwd=tmp_path,
            mcp_servers={"calc": create_sdk_mcp_server("calc", tools=[add])},
            allowed_tools=["mcp__calc__add"], max_turns=4,
            env={"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY,
                 "CLAUDE_CONFIG_DIR": str(config_dir),
                 "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"},
        )
        messages = asyncio.run(_collect(query(prompt="add 2 and 3", options=options)))

    assert ran == [{"a": 2, "b": 3}]
    [result] = [m for m in messages if isinstance(m, ResultMessage)]
    assert (result.subtype, result.is_error, result.num_turns) == ("success", False, 2)
    assert result.result == "2 + 3 = 5"
    assert result.total_cost_usd is not None and result.total_cost_usd > 0
    sent = server.requests_for("anthropic")
    assert len(sent) == 2 and not server.unmatched
    assert all(r.path == "/v1/messages" and r.stream for r in sent)
    [returned] = server.tool_results(sent[1])
    assert returned.call_id == "call_1"
    assert returned.content[0] == {"type": "text", "text": "5"} or "5" in str(returned.content)
    assert server.assistant_tool_turns(sent[1])[0].calls[0].name == "mcp__calc__add"
    for record in sent:
        assert_no_credential_outside_auth(record, KEY)
        assert_tool_names_valid(record)
        assert check_tool_schema("anthropic", server.declared_tools(record)[0].schema) == []


async def _collect(stream: Any) -> list[Any]:
    return [message async for message in stream]


def _post(url: str, payload: Any) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.headers["content-type"], response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["content-type"], exc.read()


def test_anthropic_non_stream_json_and_fallback_after_script() -> None:
    with ScriptedModelServer([tool_calls([("bash", {"cmd": "ls"})])], fallback="all done") as s:
        status, kind, body = _post(s.url + "/v1/messages", {"model": "claude-x", "messages": []})
        again = json.loads(_post(s.url + "/v1/messages", {"model": "claude-x"})[2])
    message = json.loads(body)
    assert (status, kind) == (200, "application/json")
    assert message["stop_reason"] == "tool_use"
    assert message["content"] == [{"type": "tool_use", "id": "call_1", "name": "bash",
                                   "input": {"cmd": "ls"}}]
    assert again["content"] == [{"type": "text", "text": "all done"}]
    assert [r.step_index for r in s.requests] == [0, None]


def test_unknown_paths_get_404_and_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), ScriptedModelServer([text("unused")]) as server:
        status, _, _ = _post(server.url + "/v1/embeddings", {"input": "x"})
        count_status, _, _ = _post(server.url + "/v1/messages/count_tokens", {})
    assert (status, count_status) == (404, 404)
    assert [r.path for r in server.unmatched] == ["/v1/embeddings", "/v1/messages/count_tokens"]
    assert server.requests == [] and server.remaining_steps == 1
    assert "/v1/embeddings" in caplog.text
