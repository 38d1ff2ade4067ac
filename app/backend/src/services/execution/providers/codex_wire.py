"""Neutral messages to and from OpenAI wire JSON: the Responses API and Chat Completions.

Pure functions over plain dicts, no SDK import. :mod:`.codex` sends what they build through the
SDK's low-level ``post`` so the SDK never walks the typed request (its cost grows with history).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSchema,
    Usage,
)
from services.execution.providers.common import envelope_text, make_tool_call
from services.execution.providers.schema_profiles import openai_strict

REASONING_META = "openai_reasoning"


def _arguments_text(part: ToolCallPart) -> str:
    """The arguments exactly as the model sent them, else the neutral ones as JSON."""
    raw = part.provider_meta.get("arguments")
    return raw if isinstance(raw, str) else json.dumps(part.call.args, separators=(",", ":"))


# ---------------------------------------------------------------- Responses API


def strict_function(tool: ToolSchema) -> dict[str, Any]:
    """A tool as an OpenAI strict function (both APIs use this object, wrapped differently)."""
    return {"name": tool.name, "description": tool.description,
            "parameters": openai_strict(tool.parameters), "strict": True}


def responses_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [{"type": "function", **strict_function(t)} for t in tools]


def responses_items(message: Message) -> list[dict[str, Any]]:
    """The input items of one neutral message (the model's own items kept)."""
    items: list[dict[str, Any]] = list(message.provider_meta.get(REASONING_META, []))
    for part in message.parts:
        if isinstance(part, TextPart):
            role = "assistant" if message.role is Role.ASSISTANT else "user"
            items.append({"role": role, "content": part.text})
        elif isinstance(part, ToolCallPart):
            items.append({
                "type": "function_call",
                "call_id": part.call.call_id,
                "name": part.call.tool_name,
                "arguments": _arguments_text(part),
            })
        elif isinstance(part, ToolResultPart):
            items.append({
                "type": "function_call_output",
                "call_id": part.call_id,
                "output": envelope_text(part),
            })
    return items


def parse_responses(
    data: Mapping[str, Any], tools: Mapping[str, ToolSchema], cycle: int
) -> tuple[Message, Usage, str]:
    """``(assistant message, usage, stop reason)`` of a Responses API answer."""
    parts: list[TextPart | ToolCallPart | ToolResultPart] = []
    reasoning: list[dict[str, Any]] = []
    calls = 0
    for item in data.get("output") or []:
        kind = item.get("type")
        if kind == "message":
            text = "".join(
                c.get("text", "") for c in item.get("content") or []
                if c.get("type") == "output_text"
            )
            if text:
                parts.append(TextPart(text=text))
        elif kind == "function_call":
            call = make_tool_call(item.get("call_id"), item.get("name", ""),
                                  item.get("arguments"), tools, cycle=cycle, index=calls)
            calls += 1
            meta = {"arguments": item.get("arguments"), "item_id": item.get("id")}
            parts.append(ToolCallPart(call=call, provider_meta=meta))
        elif kind == "reasoning" and item.get("encrypted_content"):
            # with store=false a reasoning item can only be sent back with its encrypted content
            reasoning.append({k: item[k] for k in ("type", "id", "summary", "encrypted_content")
                              if k in item})
    meta = {REASONING_META: reasoning} if reasoning else {}
    message = Message(role=Role.ASSISTANT, parts=parts, provider_meta=meta)
    return message, responses_usage(data.get("usage")), _responses_stop(data, calls)


def responses_usage(raw: Mapping[str, Any] | None) -> Usage:
    if not raw:
        return Usage()
    details = raw.get("input_tokens_details") or {}
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0),
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
    )


def _responses_stop(data: Mapping[str, Any], calls: int) -> str:
    if calls:
        return "tool_calls"
    if data.get("status") == "incomplete":
        reason = (data.get("incomplete_details") or {}).get("reason")
        return str(reason or "incomplete")
    return "stop"


# ---------------------------------------------------------------- Chat Completions


def chat_tools(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": strict_function(t)} for t in tools]


def chat_messages(message: Message) -> list[dict[str, Any]]:
    """The chat messages of one neutral message: tool results become ``role: tool`` messages."""
    out: list[dict[str, Any]] = []
    text = message.text
    if message.role is Role.ASSISTANT:
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        entry: dict[str, Any] = {"role": "assistant", "content": text or None}
        if calls:
            entry["tool_calls"] = [
                {
                    "id": p.call.call_id,
                    "type": "function",
                    "function": {"name": p.call.tool_name, "arguments": _arguments_text(p)},
                }
                for p in calls
            ]
        return [entry]
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            out.append({"role": "tool", "tool_call_id": part.call_id,
                        "content": envelope_text(part)})
    if text:
        out.append({"role": "user", "content": text})
    return out


def parse_chat(
    data: Mapping[str, Any], tools: Mapping[str, ToolSchema], cycle: int
) -> tuple[Message, Usage, str]:
    """``(assistant message, usage, stop reason)`` of a Chat Completions answer."""
    choices = data.get("choices") or [{}]
    choice = choices[0]
    raw = choice.get("message") or {}
    parts: list[TextPart | ToolCallPart | ToolResultPart] = []
    if raw.get("content"):
        parts.append(TextPart(text=str(raw["content"])))
    for index, tc in enumerate(raw.get("tool_calls") or []):
        fn = tc.get("function") or {}
        call = make_tool_call(tc.get("id"), fn.get("name", ""), fn.get("arguments"), tools,
                              cycle=cycle, index=index)
        parts.append(ToolCallPart(call=call, provider_meta={"arguments": fn.get("arguments")}))
    usage_raw = data.get("usage") or {}
    details = usage_raw.get("prompt_tokens_details") or {}
    usage = Usage(
        input_tokens=int(usage_raw.get("prompt_tokens") or 0),
        output_tokens=int(usage_raw.get("completion_tokens") or 0),
        cached_input_tokens=int(details.get("cached_tokens") or 0),
    )
    message = Message(role=Role.ASSISTANT, parts=parts)
    return message, usage, str(choice.get("finish_reason") or "stop")
