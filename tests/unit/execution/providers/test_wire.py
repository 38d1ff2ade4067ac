"""Pure wire conversions of the codex and gemini adapters, and the shared helpers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from services.execution.errors import ProviderRejected, ProviderUnavailable
from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    ToolSchema,
)
from services.execution.providers import codex_wire, failures, gemini_wire
from services.execution.providers.common import (
    RAW_ARGUMENTS_KEY,
    WireCache,
    decode_arguments,
    split_tool_name,
)

ENV_TOOL = ToolSchema(
    name="command_run", description="run",
    parameters={"type": "object", "additionalProperties": False,
                "properties": {"command": {"type": "string"},
                               "env": {"type": "object",
                                       "additionalProperties": {"type": "string"}}},
                "required": ["command"]},
)
TOOLS = {ENV_TOOL.name: ENV_TOOL}


def _call(call_id: str = "call_1", **meta: Any) -> ToolCallPart:
    call = ToolCall(call_id=call_id, tool_name="command_run", domain="command",
                    operation="run", args={"command": "ls"})
    return ToolCallPart(call=call, provider_meta=meta)


def _result(call_id: str = "call_1") -> ToolResultPart:
    return ToolResultPart(call_id=call_id, tool_name="command_run",
                          envelope={"ok": True, "result": {"exit_code": 0}})


@pytest.mark.parametrize(("name", "split"), [
    ("workspace_read_file", ("workspace", "read_file")),
    ("git_create_pull_request", ("git", "create_pull_request")),
    ("mcp__docs__search_pages", ("mcp", "docs__search_pages")),
])
def test_split_tool_name(name: str, split: tuple[str, str]) -> None:
    assert split_tool_name(name) == split


@pytest.mark.parametrize("raw", ['{"command": "ls"', "[1, 2]", '"text"'])
def test_unparseable_arguments_are_kept_raw(raw: str) -> None:
    assert decode_arguments(raw, "command_run", ENV_TOOL) == {RAW_ARGUMENTS_KEY: raw}


def test_arguments_go_back_to_neutral() -> None:
    raw = json.dumps({"command": "ls", "env": [{"name": "A", "value": "b"}]})
    assert decode_arguments(raw, "command_run", ENV_TOOL) == {"command": "ls", "env": {"A": "b"}}
    assert decode_arguments("", "x_y", None) == {}


def test_responses_parse_text_calls_usage_and_fallback_ids() -> None:
    data = {
        "id": "resp_1", "status": "completed",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "ENC"},
            {"type": "message", "content": [{"type": "output_text", "text": "Let me look."}]},
            {"type": "function_call", "id": "fc_1", "call_id": "call_9", "name": "command_run",
             "arguments": '{"command":"ls","env":null}'},
            {"type": "function_call", "id": "fc_2", "call_id": "", "name": "mcp__s__t",
             "arguments": "{oops"},
        ],
        "usage": {"input_tokens": 50, "output_tokens": 7,
                  "input_tokens_details": {"cached_tokens": 20}},
    }
    message, usage, stop = codex_wire.parse_responses(data, TOOLS, cycle=4)
    assert message.text == "Let me look."
    first, second = message.tool_calls
    assert (first.call_id, first.domain, first.operation, first.args) == (
        "call_9", "command", "run", {"command": "ls"})
    assert (second.call_id, second.domain, second.args) == (
        "4-1", "mcp", {RAW_ARGUMENTS_KEY: "{oops"})
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (50, 7, 20)
    assert stop == "tool_calls"
    # the next request echoes the reasoning item and the model's own arguments text
    items = codex_wire.responses_items(message)
    assert items[0]["encrypted_content"] == "ENC"
    assert items[2] == {"type": "function_call", "call_id": "call_9", "name": "command_run",
                        "arguments": '{"command":"ls","env":null}'}


def test_responses_items_of_results_and_user_text() -> None:
    msg = Message(role=Role.TOOL, parts=[_result()])
    assert codex_wire.responses_items(msg) == [{
        "type": "function_call_output", "call_id": "call_1",
        "output": '{"ok":true,"result":{"exit_code":0}}'}]
    user = Message(role=Role.USER, parts=[TextPart(text="hi")])
    assert codex_wire.responses_items(user) == [{"role": "user", "content": "hi"}]


def test_responses_incomplete_answer_says_why() -> None:
    data = {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
            "output": []}
    assert codex_wire.parse_responses(data, {}, 0)[2] == "max_output_tokens"


def test_chat_round_trip() -> None:
    data = {"choices": [{"finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "command_run", "arguments": '{"command":"ls"}'}}]}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3}}
    message, usage, stop = codex_wire.parse_chat(data, TOOLS, 0)
    assert message.tool_calls[0].args == {"command": "ls"}
    assert (usage.input_tokens, stop) == (9, "tool_calls")
    assert codex_wire.chat_messages(message) == [{
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "c1", "type": "function",
                        "function": {"name": "command_run", "arguments": '{"command":"ls"}'}}]}]
    results = codex_wire.chat_messages(Message(role=Role.TOOL, parts=[_result("c1")]))
    assert results == [{"role": "tool", "tool_call_id": "c1",
                        "content": '{"ok":true,"result":{"exit_code":0}}'}]


def test_tool_declarations_are_strict() -> None:
    [tool] = codex_wire.responses_tools([ENV_TOOL])
    assert tool["strict"] is True and tool["parameters"]["required"] == ["command", "env"]
    [chat] = codex_wire.chat_tools([ENV_TOOL])
    assert chat["function"]["strict"] is True


def test_gemini_parse_keeps_signature_and_synthesizes_ids() -> None:
    data = {"responseId": "r1", "modelVersion": "gemini-2.5-pro", "candidates": [{
        "finishReason": "STOP", "content": {"role": "model", "parts": [
            {"text": "thinking...", "thought": True},
            {"text": "Running it.", "thoughtSignature": "VFM="},
            {"functionCall": {"name": "command_run", "args": {"command": "ls", "env": [
                {"name": "A", "value": "1"}]}}, "thoughtSignature": "U0lH"},
            {"functionCall": {"name": "command_run", "args": {"command": "pwd"}, "id": "g-7"}},
        ]}}],
        "usageMetadata": {"promptTokenCount": 30, "candidatesTokenCount": 5,
                          "thoughtsTokenCount": 4, "cachedContentTokenCount": 10}}
    message, usage, stop = gemini_wire.parse(data, TOOLS, cycle=2)
    first, second = message.tool_calls
    assert (first.call_id, first.args) == ("2-0", {"command": "ls", "env": {"A": "1"}})
    assert second.call_id == "g-7"
    assert message.text == "Running it."
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (30, 9, 10)
    assert stop == "tool_calls"
    content = gemini_wire.content(message)
    assert content is not None
    text, fc1, fc2 = content["parts"]
    assert text == {"text": "Running it.", "thoughtSignature": "VFM="}
    assert fc1 == {"functionCall": {"name": "command_run", "args": {
        "command": "ls", "env": [{"name": "A", "value": "1"}]}}, "thoughtSignature": "U0lH"}
    assert fc2 == {"functionCall": {"name": "command_run", "args": {"command": "pwd"},
                                    "id": "g-7"}}


def test_gemini_function_responses() -> None:
    msg = Message(role=Role.TOOL, parts=[_result("2-0"), _result("g-7")])
    content = gemini_wire.content(msg)
    assert content == {"role": "user", "parts": [
        {"functionResponse": {"name": "command_run",
                              "response": {"ok": True, "result": {"exit_code": 0}}}},
        {"functionResponse": {"name": "command_run", "id": "g-7",
                              "response": {"ok": True, "result": {"exit_code": 0}}}},
    ]}


def test_gemini_blocked_prompt() -> None:
    message, _, stop = gemini_wire.parse({"promptFeedback": {"blockReason": "SAFETY"}}, {}, 0)
    assert message.parts == [] and stop == "blocked:SAFETY"


def test_wire_cache_converts_each_message_once() -> None:
    cache: WireCache[str] = WireCache(lambda m: m.text)
    history = [Message(role=Role.USER, parts=[TextPart(text=str(i))]) for i in range(3)]
    for n in range(1, 4):
        assert cache.render(history[:n]) == [str(i) for i in range(n)]
    assert cache.builds == 3
    history[1] = history[1].model_copy(update={"parts": [TextPart(text="changed")]})
    assert cache.render(history) == ["0", "changed", "2"]  # a replaced message is noticed
    assert cache.builds == 4


def test_wire_cache_notices_elision() -> None:
    cache: WireCache[bool] = WireCache(lambda m: any(
        isinstance(p, ToolResultPart) and p.elided for p in m.parts))
    msg = Message(role=Role.TOOL, parts=[_result()])
    assert cache.render([msg]) == [False]
    with pytest.raises(ValidationError):  # frozen: nobody changes a turn in place
        msg.parts[0].elided = True  # type: ignore[misc, union-attr]
    elided = msg.model_copy(update={"parts": [_result().model_copy(update={"elided": True})]})
    assert cache.render([elided]) == [True]


@pytest.mark.parametrize(("status", "kind"), [
    (500, ProviderUnavailable), (503, ProviderUnavailable), (429, ProviderUnavailable),
    (424, ProviderUnavailable), (408, ProviderUnavailable), (400, ProviderRejected),
    (401, ProviderRejected), (403, ProviderRejected), (404, ProviderRejected),
    (422, ProviderRejected),
])
def test_status_classification(status: int, kind: type[Exception]) -> None:
    assert isinstance(failures.from_status("codex", status, "x"), kind)


def test_retry_after_forms_and_redaction() -> None:
    assert failures.retry_after_seconds({"Retry-After": "7"}) == 7.0
    assert failures.retry_after_seconds({"retry-after-ms": "1500"}) == 1.5
    assert failures.retry_after_seconds({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert failures.retry_after_seconds({}) is None
    err = failures.from_status("codex", 401, "bad key sk-secret-123", secrets=("sk-secret-123",))
    assert "sk-secret-123" not in str(err) and "[REDACTED]" in err.message
    assert "retry_after" not in failures.from_status("codex", 429, "slow").details


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "replace", "drop", "swap", "same"]),
                              st.integers(min_value=0, max_value=20)), max_size=30))
def test_wire_cache_renders_what_building_each_message_would(ops: list[tuple[str, int]]) -> None:
    """Turns that append, replace, drop or reorder messages (in the same list or a new one):
    each render is every message built, and only messages not in the last render are built."""
    cache: WireCache[str] = WireCache(lambda m: m.text)
    history: list[Message] = []
    counter = iter(range(10**6))
    last: list[Message] = []
    for op, n in ops:
        if op == "append" or not history:
            history.append(Message(role=Role.USER, parts=[TextPart(text=str(next(counter)))]))
        elif op == "replace":
            history[n % len(history)] = Message(role=Role.USER,
                                                parts=[TextPart(text=str(next(counter)))])
        elif op == "drop":
            del history[n % len(history)]
        elif op == "swap":
            history = [*history[n % len(history):], *history[:n % len(history)]]
        builds = cache.builds
        assert cache.render(history) == [m.text for m in history]
        assert cache.builds - builds == len({id(m) for m in history} - {id(m) for m in last})
        last = list(history)
