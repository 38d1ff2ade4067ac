"""Helpers every turn-based adapter shares: tool-call normalization and the wire cache.

No SDK import here. The wire cache is what keeps an adapter's per-turn cost flat as the
conversation grows: each neutral message is converted to its wire form once and reused on every
later turn (the loop treats a message as immutable once appended; replacing a part, or marking a
tool result ``elided``, is noticed and converts that message again).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from services.execution.messages import (
    Message,
    ToolCall,
    ToolResultPart,
    ToolSchema,
    same_prefix,
)
from services.execution.providers.schema_profiles import openai_args_to_neutral

T = TypeVar("T")

RAW_ARGUMENTS_KEY = "__raw_arguments__"
MCP_PREFIX = "mcp__"


def split_tool_name(tool_name: str) -> tuple[str, str]:
    """``workspace_read_file`` -> ``(workspace, read_file)``.

    MCP tools keep their server: ``mcp__srv__tool`` -> ``(mcp, srv__tool)``.
    """
    if tool_name.startswith(MCP_PREFIX):
        return "mcp", tool_name[len(MCP_PREFIX):]
    domain, _, operation = tool_name.partition("_")
    return domain, operation


def fallback_call_id(cycle: int, index: int) -> str:
    """The deterministic id of a tool call the provider gave no id: ``<cycle>-<index>``."""
    return f"{cycle}-{index}"


def decode_arguments(raw: Any, tool_name: str, schema: ToolSchema | None) -> dict[str, Any]:
    """The arguments of one call as neutral data.

    A JSON string is parsed; what does not parse into an object is kept under
    ``__raw_arguments__`` so the dispatcher answers ``invalid_arguments`` and the run goes on.
    Profiled shapes (name/value pairs, nulls for optional properties) go back to neutral.
    """
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            return {RAW_ARGUMENTS_KEY: raw}
    else:
        parsed = raw if raw is not None else {}
    if not isinstance(parsed, dict):
        return {RAW_ARGUMENTS_KEY: raw if isinstance(raw, str) else json.dumps(raw)}
    if schema is None:
        return parsed
    return openai_args_to_neutral(tool_name, parsed, schema.parameters)


def make_tool_call(
    call_id: str | None, tool_name: str, raw_args: Any, tools: Mapping[str, ToolSchema],
    *, cycle: int, index: int,
) -> ToolCall:
    domain, operation = split_tool_name(tool_name)
    return ToolCall(
        call_id=call_id or fallback_call_id(cycle, index),
        tool_name=tool_name,
        domain=domain,
        operation=operation,
        args=decode_arguments(raw_args, tool_name, tools.get(tool_name)),
    )


def envelope_text(part: ToolResultPart) -> str:
    """The envelope as the JSON string sent back to the model."""
    return json.dumps(part.envelope, separators=(",", ":"), ensure_ascii=False)


class WireCache(Generic[T]):
    """Each message's wire form, built once per message object (messages are frozen and replaced,
    never changed in place); entries for messages no longer sent are dropped.

    A turn sends the previous turn's messages and one or two more: the longest run of the same
    message objects at the start is taken from the last render as it is, without a lookup per
    message (the per-turn cost does not grow with the history); the rest are looked up by
    object, or built."""

    def __init__(self, build: Callable[[Message], T]) -> None:
        self._build = build
        self._sent: list[Message] = []
        self._values: list[T] = []
        self.builds = 0  # how many conversions ran (tests check the cache is used)

    def render(self, messages: Sequence[Message]) -> list[T]:
        sent = self._sent
        same = same_prefix(messages, sent)
        out = self._values[:same]
        if same < len(messages):
            earlier = ({id(m): (m, v) for m, v in zip(sent[same:], self._values[same:],
                                                      strict=True)}
                       if same < len(sent) else {})
            for message in messages[same:]:
                hit = earlier.get(id(message))
                if hit is not None and hit[0] is message:
                    out.append(hit[1])
                else:
                    out.append(self._build(message))
                    self.builds += 1
        self._sent, self._values = list(messages), out
        return list(out)


class KeyedCache(Generic[T]):
    """One cached value for the last key seen (the tool list of a run rarely changes)."""

    def __init__(self, build: Callable[[list[ToolSchema]], T]) -> None:
        self._build = build
        self._key: tuple[Any, ...] | None = None
        self._value: T | None = None

    def get(self, tools: list[ToolSchema]) -> T:
        key = tuple((t.name, t.description, id(t.parameters)) for t in tools)
        if self._key != key or self._value is None:
            self._value = self._build(tools)
            self._key = key
        return self._value


def dumps(value: Any) -> bytes:
    """Compact JSON bytes (the wire form)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def join_json_array(fragments: Iterable[bytes]) -> bytes:
    return b"[" + b",".join([f for f in fragments if f]) + b"]"
