"""The gemini adapter sends its request as bytes assembled from cached JSON text: the same bytes
``json.dumps`` makes of the request dict (what the SDK sent before), turn after turn, as the
history grows, changes in place (a replaced message) and holds messages that send nothing."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.execution.messages import (
    Message,
    ModelRequest,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    ToolSchema,
)
from services.execution.providers.gemini import GeminiClient

TOOLS = [
    ToolSchema(name="command_run", description="run a command \u00e9\u2603",
               parameters={"type": "object", "properties": {"argv": {
                   "type": "array", "items": {"type": "string"}}}, "required": ["argv"]}),
    ToolSchema(name="workspace_read_file", description='read "a" file',
               parameters={"type": "object", "properties": {"path": {"type": "string"}}}),
]
TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=30)
JSON: Any = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8)


@st.composite
def _message(draw: st.DrawFn, index: int) -> Message:
    kind = draw(st.sampled_from(["user", "model", "results", "empty"]))
    if kind == "user":
        return Message(role=Role.USER, parts=[TextPart(text=draw(TEXT))])
    if kind == "empty":  # sends nothing (no part gemini knows)
        return Message(role=Role.USER, parts=[])
    if kind == "model":
        call = ToolCall(call_id=f"call_{index}", tool_name="command_run", domain="command",
                        operation="run", args=draw(st.dictionaries(TEXT, JSON, max_size=3)))
        meta = draw(st.sampled_from([{}, {"thought_signature": "c2ln\u00e9"},
                                     {"synthetic_id": True}]))
        parts: list[Any] = [ToolCallPart(call=call, provider_meta=meta)]
        if draw(st.booleans()):
            parts.insert(0, TextPart(text=draw(TEXT)))
        return Message(role=Role.ASSISTANT, parts=parts)
    envelope = draw(st.dictionaries(TEXT, JSON, max_size=4))
    return Message(role=Role.TOOL, parts=[ToolResultPart(
        call_id=draw(st.sampled_from([f"call_{index}", f"gemini-{index}-0"])),
        tool_name="command_run", envelope=envelope)])


_CLIENTS: dict[tuple[int | None, int | None], GeminiClient] = {}


def _client(max_output: int | None, thinking: int | None) -> GeminiClient:
    """One client per generation config (making one takes most of a second); its caches carry
    over from example to example, as they do from turn to turn."""
    key = (max_output, thinking)
    if key not in _CLIENTS:
        _CLIENTS[key] = GeminiClient(model="gemini-2.5-pro", api_key="k",
                                     base_url="http://127.0.0.1:9", max_output_tokens=max_output,
                                     thinking_budget=thinking)
    return _CLIENTS[key]


@settings(max_examples=150, deadline=None)
@given(data=st.data(), system=TEXT, tools=st.booleans(),
       max_output=st.sampled_from([None, 8192]), thinking=st.sampled_from([None, 0, 64]),
       turns=st.lists(st.sampled_from(["append", "append", "replace", "drop"]), max_size=12))
def test_the_body_bytes_are_json_dumps_of_the_request(
        data: st.DataObject, system: str, tools: bool, max_output: int | None,
        thinking: int | None, turns: list[str]) -> None:
    client = _client(max_output, thinking)
    built = client.wire_conversions
    history: list[Message] = [data.draw(_message(0))]
    for index, turn in enumerate(turns, start=1):
        if turn == "append" or len(history) < 2:
            history.append(data.draw(_message(index)))
        elif turn == "replace":
            history[data.draw(st.integers(0, len(history) - 1))] = data.draw(_message(index))
        else:
            del history[data.draw(st.integers(0, len(history) - 1))]
        request = ModelRequest(system=system, messages=list(history),
                               tools=TOOLS if tools else [], cycle=index)
        body = client._body(request)
        assert client._body_bytes(request) == json.dumps(body).encode("utf-8")
    assert client.wire_conversions - built <= len(turns) + 1  # each message converted once


def test_a_request_without_messages_system_or_tools() -> None:
    """Positive control of the shape: an empty request is what ``json.dumps`` makes of it."""
    client = GeminiClient(model="gemini-2.5-pro", api_key="k", base_url="http://127.0.0.1:9")
    request = ModelRequest(system="", messages=[], tools=[])
    assert client._body_bytes(request) == b'{"contents": []}'
    assert json.loads(client._body_bytes(request)) == client._body(request)
