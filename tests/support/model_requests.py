"""What a client sent to the scripted model server, recorded and read back in a vendor-neutral way.

``RequestRecord`` is one HTTP request as received. The readers below pull out, for any of the four
wire formats (OpenAI Responses, OpenAI Chat, Gemini generateContent, Anthropic Messages), the tools
the client declared, the tool results it sent back and the model's own tool-call turns it kept in
the conversation history.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class RequestRecord:
    """One request: ``turn`` is the logical model turn, ``attempt`` counts from 1 within it."""

    vendor: str  # "openai" | "gemini" | "anthropic" | "unknown"
    api: str  # "responses" | "chat" | "generateContent" | "streamGenerateContent" | "messages"
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    raw_body: bytes
    body: Any
    model: str | None = None
    turn: int = 0
    attempt: int = 1
    step_index: int | None = None  # None: the script was exhausted, the fallback answered

    @property
    def stream(self) -> bool:
        """True when the client asked for a streamed reply."""
        if self.api == "streamGenerateContent":
            return True
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


@dataclass(frozen=True)
class DeclaredTool:
    """A tool as the client declared it; ``schema`` is the parameter schema it sent."""

    name: str
    description: str | None
    schema: Mapping[str, Any] | None
    strict: bool | None = None
    schema_field: str = ""  # where the schema was: parameters, parametersJsonSchema, input_schema


@dataclass(frozen=True)
class ToolResult:
    """A tool result the client sent back to the model."""

    call_id: str | None
    content: Any
    name: str | None = None
    is_error: bool | None = None


@dataclass(frozen=True)
class ToolCallEcho:
    """A tool call of the model's, as the client kept it in the history it sent."""

    name: str
    arguments: Any
    call_id: str | None = None
    thought_signature: str | None = None


@dataclass(frozen=True)
class AssistantTurn:
    """One model turn with tool calls, as kept in the history."""

    calls: tuple[ToolCallEcho, ...] = field(default_factory=tuple)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _parse_json_text(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def declared_tools(record: RequestRecord) -> list[DeclaredTool]:
    """The tools declared in the request, in the order sent."""
    body = _as_dict(record.body)
    tools = _as_list(body.get("tools"))
    if record.vendor == "gemini":
        return [_gemini_tool(decl) for t in tools for decl in _as_list(_as_dict(t).get(
            "functionDeclarations", _as_dict(t).get("function_declarations")))]
    if record.vendor == "anthropic":
        return [
            DeclaredTool(t.get("name", ""), t.get("description"), t.get("input_schema"),
                         None, "input_schema")
            for t in map(_as_dict, tools)
        ]
    if record.api == "chat":
        fns = [_as_dict(_as_dict(t).get("function")) for t in tools]
        return [
            DeclaredTool(f.get("name", ""), f.get("description"), f.get("parameters"),
                         f.get("strict"), "parameters")
            for f in fns
        ]
    return [
        DeclaredTool(t.get("name", ""), t.get("description"), t.get("parameters"),
                     t.get("strict"), "parameters")
        for t in map(_as_dict, tools)
        if t.get("type") == "function"
    ]


def _gemini_tool(decl: Any) -> DeclaredTool:
    d = _as_dict(decl)
    for key in ("parametersJsonSchema", "parameters_json_schema", "parameters"):
        if key in d:
            return DeclaredTool(d.get("name", ""), d.get("description"), d[key], None, key)
    return DeclaredTool(d.get("name", ""), d.get("description"), None)


def _history(record: RequestRecord) -> list[Any]:
    body = _as_dict(record.body)
    if record.vendor == "gemini":
        return _as_list(body.get("contents"))
    if record.api == "responses":
        return _as_list(body.get("input"))
    return _as_list(body.get("messages"))


def _gemini_parts(record: RequestRecord, role: str) -> Iterator[dict[str, Any]]:
    for content in map(_as_dict, _history(record)):
        if content.get("role", "user") == role:
            yield from map(_as_dict, _as_list(content.get("parts")))


def _anthropic_blocks(record: RequestRecord, role: str) -> Iterator[dict[str, Any]]:
    for message in map(_as_dict, _history(record)):
        if message.get("role") == role:
            yield from map(_as_dict, _as_list(message.get("content")))


def tool_results(record: RequestRecord) -> list[ToolResult]:
    """The tool results sent back in this request, in history order."""
    items = list(map(_as_dict, _history(record)))
    if record.vendor == "gemini":
        responses = (_as_dict(p.get("functionResponse")) for p in _gemini_parts(record, "user"))
        return [
            ToolResult(r.get("id"), r.get("response"), r.get("name"))
            for r in responses if r
        ]
    if record.vendor == "anthropic":
        return [
            ToolResult(b.get("tool_use_id"), b.get("content"), None, b.get("is_error"))
            for b in _anthropic_blocks(record, "user") if b.get("type") == "tool_result"
        ]
    if record.api == "chat":
        return [
            ToolResult(m.get("tool_call_id"), m.get("content"), m.get("name"))
            for m in items if m.get("role") == "tool"
        ]
    return [
        ToolResult(i.get("call_id"), i.get("output"))
        for i in items if i.get("type") == "function_call_output"
    ]


def assistant_tool_turns(record: RequestRecord) -> list[AssistantTurn]:
    """The model's tool-call turns that the client kept in the history it sent."""
    if record.vendor == "gemini":
        return _gemini_turns(record)
    if record.vendor == "anthropic":
        return _anthropic_turns(record)
    if record.api == "chat":
        return _chat_turns(record)
    return _responses_turns(record)


def _gemini_turns(record: RequestRecord) -> list[AssistantTurn]:
    turns = []
    for content in map(_as_dict, _history(record)):
        if content.get("role") != "model":
            continue
        calls = tuple(
            ToolCallEcho(fc.get("name", ""), fc.get("args"), fc.get("id"),
                         p.get("thoughtSignature", p.get("thought_signature")))
            for p in map(_as_dict, _as_list(content.get("parts")))
            if (fc := _as_dict(p.get("functionCall")))
        )
        if calls:
            turns.append(AssistantTurn(calls))
    return turns


def _anthropic_turns(record: RequestRecord) -> list[AssistantTurn]:
    turns = []
    for message in map(_as_dict, _history(record)):
        if message.get("role") != "assistant":
            continue
        calls = tuple(
            ToolCallEcho(b.get("name", ""), b.get("input"), b.get("id"))
            for b in map(_as_dict, _as_list(message.get("content")))
            if b.get("type") == "tool_use"
        )
        if calls:
            turns.append(AssistantTurn(calls))
    return turns


def _chat_turns(record: RequestRecord) -> list[AssistantTurn]:
    turns = []
    for message in map(_as_dict, _history(record)):
        if message.get("role") != "assistant" or not message.get("tool_calls"):
            continue
        calls = []
        for call in map(_as_dict, _as_list(message.get("tool_calls"))):
            fn = _as_dict(call.get("function"))
            calls.append(ToolCallEcho(fn.get("name", ""), _parse_json_text(fn.get("arguments")),
                                      call.get("id")))
        turns.append(AssistantTurn(tuple(calls)))
    return turns


def _responses_turns(record: RequestRecord) -> list[AssistantTurn]:
    turns: list[AssistantTurn] = []
    current: list[ToolCallEcho] = []
    for item in map(_as_dict, _history(record)):
        if item.get("type") == "function_call":
            current.append(ToolCallEcho(item.get("name", ""),
                                        _parse_json_text(item.get("arguments")),
                                        item.get("call_id")))
            continue
        if current:
            turns.append(AssistantTurn(tuple(current)))
            current = []
    if current:
        turns.append(AssistantTurn(tuple(current)))
    return turns
