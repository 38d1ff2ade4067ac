"""Compaction with hysteresis: keep a long conversation inside the model's window, and its prefix
stable so that prompt caches keep hitting.

Nothing changes the conversation until the next request would pass the *high mark* (a fraction of
the model's window, 80 % by default). Then, in one step, it is condensed to the *low mark* (50 %):

1. every tool output older than the last ``keep_turns`` turns is elided to its envelope's summary
   (status, error code, exit code, paths, the first and last lines of long text);
2. if that is not enough, the oldest turns are replaced by one summary turn, written by the model
   from a fixed prompt (:data:`SUMMARY_SYSTEM`), that keeps the task, the latest plan, the files
   changed and the open problems.

Between two compactions the conversation only grows at its end, so each request extends the
previous one byte for byte. A compaction is journaled as a ``compaction`` event that holds
everything needed to apply it again (:class:`Compaction`): a resumed execution replays it
(:func:`apply_compaction`) and never asks the model again.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from services.execution.messages import Message, Role, TextPart, ToolResultPart, ToolSchema

EDGE_LINES = 3  # lines kept at each end of a long text
_LINE_CHARS = 200
_SCALAR_CHARS = 300
SUMMARY_HEAD = "[compacted] Summary of the earlier conversation, written to fit the context window."
#: The fixed summarization prompt: the last user message of the summary request, which otherwise
#: repeats the conversation's own request (system prompt, tools, history), so that the prompt
#: cache still serves it.
SUMMARY_PROMPT = (
    "[compaction request] The conversation is about to be condensed to fit the context window. "
    "Do not call any tool. Write plain text under these headings, and nothing else: TASK (the "
    "task, verbatim where short), PLAN (the latest plan and which steps are done), FILES CHANGED "
    "(paths and what changed), FINDINGS (facts learned that are still needed), OPEN PROBLEMS "
    "(errors not yet solved, questions). Be brief; never invent."
)


@dataclass(frozen=True)
class ContextPolicy:
    """The window of the model and the marks, in estimated tokens."""

    window: int
    high: float = 0.8
    low: float = 0.5
    keep_turns: int = 4

    @property
    def high_tokens(self) -> int:
        return int(self.window * self.high)

    @property
    def low_tokens(self) -> int:
        return int(self.window * self.low)


@dataclass
class Compaction:
    """One compaction as the journal records it (``data`` of the ``compaction`` event)."""

    elided: list[str] = field(default_factory=list)  # call ids whose outputs were elided
    replaced: int = 0  # leading messages replaced by the summary turn (after the elision)
    summary: str | None = None  # the summary turn's whole text
    before_tokens: int = 0
    after_tokens: int = 0
    window: int = 0

    def to_event(self) -> dict[str, Any]:
        return {"elided": list(self.elided), "replaced": self.replaced, "summary": self.summary,
                "before_tokens": self.before_tokens, "after_tokens": self.after_tokens,
                "window": self.window}

    @classmethod
    def from_event(cls, data: dict[str, Any]) -> Compaction:
        summary = data.get("summary")
        return cls(elided=[str(c) for c in data.get("elided") or []],
                   replaced=int(data.get("replaced") or 0),
                   summary=None if summary is None else str(summary),
                   before_tokens=int(data.get("before_tokens") or 0),
                   after_tokens=int(data.get("after_tokens") or 0),
                   window=int(data.get("window") or 0))


# ---------------------------------------------------------------- sizes


def fixed_tokens(system: str, tools: Sequence[ToolSchema]) -> int:
    """The estimated size of what every request repeats: the system prompt and the tools."""
    declared = json.dumps([t.model_dump(mode="json") for t in tools], separators=(",", ":"))
    return (len(system) + len(declared)) // 4 + 8


# ---------------------------------------------------------------- step 1: elision


def _edges(text: str) -> str:
    lines = text.splitlines()
    if len(lines) <= 2 * EDGE_LINES and len(text) <= _SCALAR_CHARS:
        return text
    head = [line[:_LINE_CHARS] for line in lines[:EDGE_LINES]]
    tail = [line[:_LINE_CHARS] for line in lines[-EDGE_LINES:]] if len(lines) > EDGE_LINES else []
    hidden = max(len(lines) - len(head) - len(tail), 0)
    return "\n".join([*head, f"[... {hidden} lines elided ...]", *tail])


def _summarized(value: Any, depth: int = 0) -> Any:
    """A result value reduced to what identifies it: scalars, paths, the edges of long text."""
    if isinstance(value, str):
        return _edges(value)
    if isinstance(value, dict) and depth < 2:
        return {k: _summarized(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list) and depth < 2:
        kept = [_summarized(v, depth + 1) for v in value[:10]]
        return kept + ([f"[... {len(value) - 10} more]"] if len(value) > 10 else [])
    if isinstance(value, dict | list):
        return f"[{type(value).__name__} of {len(value)}]"
    return value


def envelope_summary(part: ToolResultPart) -> ToolResultPart:
    """The tool result with its envelope reduced to its summary (deterministic: a resume
    rebuilds the same bytes)."""
    envelope = part.envelope
    stub: dict[str, Any] = {"ok": envelope.get("ok"), "call_id": part.call_id,
                            "tool_name": part.tool_name,
                            "elided": "older tool output summarized to fit the context window"}
    if envelope.get("ok"):
        stub["result"] = _summarized(envelope.get("result"))
    else:
        error = envelope.get("error") or {}
        stub["error"] = {"code": error.get("code"), "message": _edges(str(error.get("message")))}
    return part.model_copy(update={"envelope": stub, "elided": True})


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indexes of the model's turns."""
    return [i for i, m in enumerate(messages) if m.role is Role.ASSISTANT]


def elide_before(messages: list[Message], index: int,
                 only: set[str] | None = None) -> list[str]:
    """Summarize, in place, the tool outputs of ``messages[:index]`` (those of ``only`` when
    given); answers the call ids summarized."""
    done: list[str] = []
    for i in range(min(index, len(messages))):
        message = messages[i]
        if message.role is not Role.TOOL:
            continue
        targets = [p for p in message.parts if isinstance(p, ToolResultPart) and not p.elided
                   and (only is None or p.call_id in only)]
        if not targets:
            continue
        chosen = {id(p) for p in targets}
        messages[i] = message.model_copy(update={"parts": [
            envelope_summary(p) if id(p) in chosen and isinstance(p, ToolResultPart) else p
            for p in message.parts]})
        done += [p.call_id for p in targets]
    return done


# ---------------------------------------------------------------- step 2: the summary turn


def summary_cut(sizes: Sequence[int], messages: Sequence[Message], target: int) -> int:
    """The fewest leading messages to replace so that the rest fits ``target``: the cut falls
    on a model turn (never between a call and its result), after the first message; 0 when no
    cut helps."""
    starts = [i for i in turn_starts(messages) if i >= 1]
    tail = sum(sizes)
    prefix = 0
    position = 0
    for start in starts:
        prefix += sum(sizes[position:start])
        position = start
        if tail - prefix <= target:
            return start
    return starts[-1] if starts else 0


def summary_request(messages: Sequence[Message]) -> list[Message]:
    """The history of the summary request: the conversation as it was sent last, then the fixed
    prompt (a prefix the provider has cached already)."""
    return [*messages, Message(role=Role.USER, parts=[TextPart(text=SUMMARY_PROMPT)])]


COMPACTED_TURNS = "compacted_turns"


def turns_in(messages: Sequence[Message]) -> int:
    """The model turns ``messages`` hold or summarize (the loop's cycle count after a resume)."""
    return sum(1 if m.role is Role.ASSISTANT else int(m.provider_meta.get(COMPACTED_TURNS, 0))
               for m in messages)


def summary_message(summary: str, turns: int) -> Message:
    """The summary turn; ``turns``: the model turns it replaces (kept out of the wire)."""
    return Message(role=Role.USER, parts=[TextPart(text=summary)],
                   provider_meta={COMPACTED_TURNS: turns})


def summary_text(task: str, written: str) -> str:
    """The summary turn: the task verbatim, then what the model wrote."""
    return f"{SUMMARY_HEAD}\n\nThe task:\n{task}\n\n{written.strip()}"


# ---------------------------------------------------------------- replay


def apply_compaction(messages: list[Message], compaction: Compaction) -> list[Message]:
    """The conversation after a recorded compaction (what a resume rebuilds)."""
    messages = list(messages)
    if compaction.elided:
        elide_before(messages, len(messages), set(compaction.elided))
    if compaction.summary is not None and compaction.replaced > 0:
        turns = turns_in(messages[:compaction.replaced])
        messages = [summary_message(compaction.summary, turns),
                    *messages[compaction.replaced:]]
    return messages
