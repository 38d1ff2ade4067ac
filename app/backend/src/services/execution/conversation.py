"""Conversation upkeep: repairing interrupted tool calls and eliding old tool outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from services.execution.compaction import Compaction, apply_compaction
from services.execution.errors import ErrorCode
from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolResultPart,
    same_prefix,
)

KEEP_RECENT_TOOL_MESSAGES = 2


def synthetic_result(call: ToolCall, code: ErrorCode, message: str) -> ToolResultPart:
    """A result for a call that never ran (interrupted by a crash, a cancel or a stop)."""
    envelope: dict[str, Any] = {
        "ok": False, "call_id": call.call_id, "tool_name": call.tool_name,
        "domain": call.domain, "operation": call.operation, "duration_ms": 0.0,
        "error": {"code": code.value, "message": message, "details": {}, "retryable": True,
                  "request_id": "", "correlation_id": ""},
    }
    return ToolResultPart(call_id=call.call_id, tool_name=call.tool_name, envelope=envelope,
                          is_error=True)


def repair_interrupted(messages: list[Message]) -> list[Message]:
    """Every tool call gets a result: missing ones get a synthetic ``interrupted`` result."""
    messages = list(messages)
    repaired: list[Message] = []
    for index, message in enumerate(messages):
        repaired.append(message)
        calls = message.tool_calls if message.role is Role.ASSISTANT else []
        if not calls:
            continue
        following = messages[index + 1] if index + 1 < len(messages) else None
        answered = set()
        if following is not None and following.role is Role.TOOL:
            answered = {p.call_id for p in following.parts if isinstance(p, ToolResultPart)}
        missing = [
            synthetic_result(c, ErrorCode.INTERRUPTED, "the call was interrupted before it ran")
            for c in calls if c.call_id not in answered
        ]
        if not missing:
            continue
        if following is not None and following.role is Role.TOOL:
            messages[index + 1] = following.model_copy(update={"parts": [*following.parts,
                                                                          *missing]})
        else:
            repaired.append(Message(role=Role.TOOL, parts=list(missing)))
    return repaired


def estimate_tokens(message: Message) -> int:
    """A cheap size estimate (about four characters a token)."""
    size = 0
    for part in message.parts:
        if isinstance(part, TextPart):
            size += len(part.text)
        elif isinstance(part, ToolResultPart):
            size += len(json.dumps(part.envelope, default=str))
        else:
            size += len(json.dumps(part.call.args, default=str)) + 32
    return size // 4 + 4


def _elided(part: ToolResultPart) -> ToolResultPart:
    envelope = part.envelope
    stub: dict[str, Any] = {
        "ok": envelope.get("ok"), "call_id": part.call_id, "tool_name": part.tool_name,
        "elided": "older tool output removed to fit the context budget",
    }
    if not envelope.get("ok"):
        stub["error"] = {"code": (envelope.get("error") or {}).get("code")}
    return part.model_copy(update={"envelope": stub, "elided": True})


class TokenCounter:
    """Remembers each message's size estimate (messages are replaced, never changed in place)."""

    def __init__(self) -> None:
        self._sizes: dict[int, tuple[Message, int]] = {}
        self._counted: list[Message] = []  # the last list totalled, and its total
        self._total = 0

    def size(self, message: Message) -> int:
        hit = self._sizes.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        tokens = estimate_tokens(message)
        self._sizes[id(message)] = (message, tokens)
        return tokens

    def total(self, messages: list[Message]) -> int:
        """The sum of the messages' sizes; a list that starts with the whole list totalled last
        time (the same objects: a turn appends) adds only its new messages' sizes."""
        if len(self._sizes) > 2 * len(messages) + 16:  # forget replaced messages
            live = {id(m) for m in messages}
            self._sizes = {k: v for k, v in self._sizes.items() if k in live}
        counted = self._counted
        same = same_prefix(messages, counted)
        if same == len(counted):
            total = self._total + sum([self.size(m) for m in messages[same:]])
        else:
            total = sum([self.size(m) for m in messages])
        self._counted, self._total = list(messages), total
        return total


def elide_old_outputs(messages: list[Message], token_budget: int,
                      counter: TokenCounter | None = None) -> int:
    """Replace the oldest tool outputs in place until the conversation fits; returns how many."""
    counter = counter or TokenCounter()
    total = counter.total(messages)
    if total <= token_budget:
        return 0
    tool_indexes = [i for i, m in enumerate(messages) if m.role is Role.TOOL]
    elided = 0
    for index in tool_indexes[:-KEEP_RECENT_TOOL_MESSAGES]:
        if total <= token_budget:
            break
        message = messages[index]
        if all(not isinstance(p, ToolResultPart) or p.elided for p in message.parts):
            continue
        before = counter.size(message)
        parts = [_elided(p) if isinstance(p, ToolResultPart) and not p.elided else p
                 for p in message.parts]
        messages[index] = message.model_copy(update={"parts": parts})
        total -= before - counter.size(messages[index])
        elided += 1
    return elided


def rebuild_messages(events: list[tuple[str, dict[str, Any]]]) -> list[Message]:
    """The conversation a journal recorded, for a resume: ``(kind, data)`` pairs in ``seq`` order.

    The task, each model turn (as the provider sent it, ``provider_meta`` included), the results
    of its tool calls, a loop warning the model was shown, and each compaction applied again
    where it happened. Calls without a recorded result are left unanswered:
    :func:`repair_interrupted` answers them.
    """
    messages: list[Message] = []
    results: list[ToolResultPart] = []
    warning: str | None = None

    def flush() -> None:
        nonlocal results, warning
        if results:
            messages.append(Message(role=Role.TOOL, parts=results))
        if warning:
            messages.append(Message(role=Role.USER, parts=[TextPart(text=warning)]))
        results, warning = [], None

    for kind, data in events:
        if kind == "started" and not messages:
            messages.append(Message(role=Role.USER, parts=[TextPart(text=str(data["task"]))]))
        elif kind == "model_response" and "message" in data:
            flush()
            messages.append(Message.model_validate(data["message"]))
        elif kind == "tool_result":
            call = ToolCall.model_validate(data["call"])
            envelope = dict(data["envelope"])
            results.append(ToolResultPart(call_id=call.call_id, tool_name=call.tool_name,
                                          envelope=envelope, is_error=not envelope.get("ok")))
        elif kind == "warning" and data.get("code") == "loop_warning":
            warning = str(data.get("message"))
        elif kind == "compaction" and data.get("source") is None:  # replayed, not recomputed
            flush()
            messages[:] = apply_compaction(messages, Compaction.from_event(data))
    flush()
    return messages


def recorded_usage(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any] | None:
    """The execution's usage totals as the journal last recorded them (``None``: none yet)."""
    for kind, data in reversed(events):
        if kind == "usage" and isinstance(data.get("total"), dict):
            return dict(data["total"])
    return None


@dataclass(frozen=True)
class PendingBatch:
    """The model's last turn whose tool calls were not all answered, and the results it has."""

    turn: Message
    answered: tuple[ToolResultPart, ...]


def split_pending_batch(messages: list[Message]) -> tuple[list[Message], PendingBatch | None]:
    """The history without its trailing turn when that turn's calls are not all answered (an
    execution paused for an approval), and that turn; else the history as it is and ``None``."""
    index = max((i for i, m in enumerate(messages) if m.role is Role.ASSISTANT), default=-1)
    if index < 0 or not messages[index].tool_calls:
        return messages, None
    rest = messages[index + 1:]
    if any(m.role is not Role.TOOL for m in rest):
        return messages, None
    answered = tuple(p for m in rest for p in m.parts if isinstance(p, ToolResultPart))
    if {p.call_id for p in answered} >= {c.call_id for c in messages[index].tool_calls}:
        return messages, None
    return messages[:index], PendingBatch(messages[index], answered)
