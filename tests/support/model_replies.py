"""Replies of the scripted model server in each vendor's wire format.

A script step (``Text`` or ``ToolCalls``) becomes an OpenAI Responses object, an OpenAI Chat
completion, a Gemini ``GenerateContentResponse`` (JSON or ``alt=sse`` chunks) or an Anthropic
``Message`` (JSON or the SSE event sequence Claude Code reads). ``Error`` steps become the vendor's
usual error JSON unless the step brings its own body. Field sets follow what the SDKs' strict
response models require (``OpenAI(_strict_response_validation=True)`` checks them).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from tests.support.model_requests import RequestRecord
from tests.support.model_script import Error, Text, ToolCalls, Usage

NewId = Callable[[str], str]


@dataclass(frozen=True)
class HttpReply:
    """Status, headers and body bytes ready to send."""

    status: int
    body: bytes
    content_type: str = "application/json"
    headers: Mapping[str, str] = field(default_factory=dict)


def _json_reply(payload: Any, status: int = 200) -> HttpReply:
    return HttpReply(status, json.dumps(payload).encode())


def _sse(events: list[tuple[str | None, Any]]) -> HttpReply:
    chunks = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        chunks.append(f"{head}data: {json.dumps(data)}\n\n")
    return HttpReply(200, "".join(chunks).encode(), "text/event-stream")


def render(record: RequestRecord, reply: Text | ToolCalls, new_id: NewId) -> HttpReply:
    """The success reply for ``record``'s API."""
    call_ids = [new_id("call") for _ in reply.calls] if isinstance(reply, ToolCalls) else []
    if record.vendor == "gemini":
        return _gemini(record, reply, call_ids, new_id)
    if record.vendor == "anthropic":
        return _anthropic(record, reply, call_ids, new_id)
    if record.api == "chat":
        return _json_reply(_chat(record, reply, call_ids, new_id))
    if record.stream:
        return _responses_stream(_responses(record, reply, call_ids, new_id))
    return _json_reply(_responses(record, reply, call_ids, new_id))


def _text_of(reply: Text | ToolCalls) -> str | None:
    return reply.text


def _calls(reply: Text | ToolCalls) -> list[tuple[str, Mapping[str, Any]]]:
    if isinstance(reply, Text):
        return []
    return [(c.name, c.arguments) for c in reply.calls]


# --- OpenAI Responses -------------------------------------------------------------------------


def _responses(
    record: RequestRecord, reply: Text | ToolCalls, call_ids: list[str], new_id: NewId
) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if (text := _text_of(reply)) is not None:
        output.append({
            "id": new_id("msg"), "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    for call_id, (name, args) in zip(call_ids, _calls(reply), strict=True):
        output.append({
            "id": new_id("fc"), "type": "function_call", "status": "completed",
            "call_id": call_id, "name": name, "arguments": json.dumps(args),
        })
    now = time.time()
    return {
        "id": new_id("resp"), "object": "response", "created_at": now, "completed_at": now,
        "status": "completed", "model": record.model or "gpt-scripted", "output": output,
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "error": None, "incomplete_details": None, "usage": _responses_usage(reply.usage),
    }


def _responses_stream(response: dict[str, Any]) -> HttpReply:
    """The Responses API over SSE (``stream: true``, what the Codex CLI asks for): created, each
    output item added and done (text deltas for messages), completed with the whole response."""
    events: list[tuple[str | None, Any]] = []
    seq = iter(range(10_000))
    start = {**response, "status": "in_progress", "output": [], "usage": None}
    events.append(("response.created", {"type": "response.created", "response": start,
                                         "sequence_number": next(seq)}))
    for index, item in enumerate(response["output"]):
        events.append(("response.output_item.added", {
            "type": "response.output_item.added", "output_index": index,
            "item": {**item, "status": "in_progress"}, "sequence_number": next(seq)}))
        if item["type"] == "message":
            events.append(("response.output_text.delta", {
                "type": "response.output_text.delta", "item_id": item["id"],
                "output_index": index, "content_index": 0,
                "delta": item["content"][0]["text"], "logprobs": [],
                "sequence_number": next(seq)}))
        events.append(("response.output_item.done", {
            "type": "response.output_item.done", "output_index": index, "item": item,
            "sequence_number": next(seq)}))
    events.append(("response.completed", {"type": "response.completed", "response": response,
                                          "sequence_number": next(seq)}))
    return _sse(events)


def _responses_usage(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "input_tokens_details": {"cached_tokens": usage.cached_tokens, "cache_write_tokens": 0},
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.total_tokens,
    }


# --- OpenAI Chat Completions ------------------------------------------------------------------


def _chat(
    record: RequestRecord, reply: Text | ToolCalls, call_ids: list[str], new_id: NewId
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": _text_of(reply), "refusal": None}
    calls = _calls(reply)
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for cid, (name, args) in zip(call_ids, calls, strict=True)
        ]
    usage = reply.usage
    return {
        "id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()),
        "model": record.model or "gpt-scripted",
        "choices": [{
            "index": 0, "message": message, "logprobs": None,
            "finish_reason": "tool_calls" if calls else "stop",
        }],
        "usage": {
            "prompt_tokens": usage.input_tokens, "completion_tokens": usage.output_tokens,
            "total_tokens": usage.total_tokens,
            "prompt_tokens_details": {"cached_tokens": usage.cached_tokens},
            "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        },
    }


# --- Gemini -----------------------------------------------------------------------------------


def _gemini(
    record: RequestRecord, reply: Text | ToolCalls, call_ids: list[str], new_id: NewId
) -> HttpReply:
    parts: list[dict[str, Any]] = []
    if (text := _text_of(reply)) is not None:
        parts.append({"text": text})
    for index, (cid, (name, args)) in enumerate(zip(call_ids, _calls(reply), strict=True)):
        part: dict[str, Any] = {"functionCall": {"name": name, "args": dict(args)}}
        if isinstance(reply, ToolCalls) and reply.gemini_call_ids:
            part["functionCall"]["id"] = cid
        if index == 0 and isinstance(reply, ToolCalls) and reply.thought_signature is not None:
            part["thoughtSignature"] = base64.b64encode(reply.thought_signature).decode()
        parts.append(part)
    response_id = new_id("gresp")
    model = record.model or "gemini-scripted"
    if not record.stream:
        return _json_reply(_gemini_chunk(parts, reply.usage, response_id, model, final=True))
    chunks = [
        _gemini_chunk([part], reply.usage, response_id, model, final=i == len(parts) - 1)
        for i, part in enumerate(parts)
    ]
    return _sse([(None, chunk) for chunk in chunks])


def _gemini_chunk(
    parts: list[dict[str, Any]], usage: Usage, response_id: str, model: str, *, final: bool
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "responseId": response_id,
                             "modelVersion": model}
    if final:
        candidate["finishReason"] = "STOP"
        meta = {"promptTokenCount": usage.input_tokens,
                "candidatesTokenCount": usage.output_tokens,
                "totalTokenCount": usage.total_tokens}
        if usage.cached_tokens:
            meta["cachedContentTokenCount"] = usage.cached_tokens
        if usage.reasoning_tokens:
            meta["thoughtsTokenCount"] = usage.reasoning_tokens
        chunk["usageMetadata"] = meta
    return chunk


# --- Anthropic Messages -----------------------------------------------------------------------


def _anthropic_blocks(reply: Text | ToolCalls, call_ids: list[str]) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    if (text := _text_of(reply)) is not None:
        blocks.append({"type": "text", "text": text})
    for cid, (name, args) in zip(call_ids, _calls(reply), strict=True):
        blocks.append({"type": "tool_use", "id": cid, "name": name, "input": dict(args)})
    return blocks


def _anthropic_usage(usage: Usage, output_tokens: int) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens, "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0, "cache_read_input_tokens": usage.cached_tokens,
    }


def _anthropic(
    record: RequestRecord, reply: Text | ToolCalls, call_ids: list[str], new_id: NewId
) -> HttpReply:
    blocks = _anthropic_blocks(reply, call_ids)
    stop_reason = "tool_use" if call_ids else "end_turn"
    message = {
        "id": new_id("msg"), "type": "message", "role": "assistant",
        "model": record.model or "claude-scripted", "content": blocks,
        "stop_reason": stop_reason, "stop_sequence": None,
        "usage": _anthropic_usage(reply.usage, reply.usage.output_tokens),
    }
    if not record.stream:
        return _json_reply(message)
    start = dict(message, content=[], stop_reason=None,
                 usage=_anthropic_usage(reply.usage, 1))
    events: list[tuple[str | None, Any]] = [("message_start", {"type": "message_start",
                                                                "message": start})]
    for index, block in enumerate(blocks):
        events.extend(_anthropic_block_events(index, block))
    events.append(("message_delta", {
        "type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": None},
        "usage": {"output_tokens": reply.usage.output_tokens},
    }))
    events.append(("message_stop", {"type": "message_stop"}))
    return _sse(events)


def _anthropic_block_events(index: int, block: dict[str, Any]) -> list[tuple[str | None, Any]]:
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    return [
        ("content_block_start", {"type": "content_block_start", "index": index,
                                 "content_block": opening}),
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": index}),
    ]


# --- Errors -----------------------------------------------------------------------------------

_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                  404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
                  503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"}
_ANTHROPIC_TYPE = {400: "invalid_request_error", 401: "authentication_error",
                   403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                   529: "overloaded_error"}


def render_error(record: RequestRecord, err: Error) -> HttpReply:
    """The error reply for ``err``, in the vendor's usual error shape unless a body was given."""
    headers = dict(err.headers)
    if isinstance(err.body, str):
        return HttpReply(err.status, err.body.encode(), "text/plain", headers)
    if err.body is not None:
        return HttpReply(err.status, json.dumps(err.body).encode(), headers=headers)
    message = f"scripted error {err.status}"
    payload: dict[str, Any]
    if record.vendor == "gemini":
        payload = {"error": {"code": err.status, "message": message,
                             "status": _GEMINI_STATUS.get(err.status, "UNKNOWN")}}
    elif record.vendor == "anthropic":
        payload = {"type": "error", "error": {
            "type": _ANTHROPIC_TYPE.get(err.status, "api_error"), "message": message}}
    else:
        try:
            phrase = HTTPStatus(err.status).phrase.lower().replace(" ", "_")
        except ValueError:
            phrase = "error"
        payload = {"error": {"message": message, "type": phrase, "param": None, "code": None}}
    return HttpReply(err.status, json.dumps(payload).encode(), headers=headers)
