"""Model fallback: the next model of an agent's ``models`` when its provider stays unavailable.

:class:`ModelFallback` holds the models still to try and a builder (the composition root's: it
knows the workspace, the scratch directory, the credentials). FrontierAgent asks it for the next
engine when a model call ends in ``provider_unavailable`` after every retry (a 429/5xx/overloaded
answer, a refused connection), journals a ``model_fallback`` event and goes
on with the conversation so far: a turn-based engine takes the neutral history as it is; a
self-driving engine (claude), which starts a session of its own, gets the task followed by a
digest of that history (:func:`conversation_digest`).

A resumed execution starts at the model its journal last fell back to
(:func:`resume_position`), not at the first one again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.execution.agent_profile import ModelChoice
from services.execution.messages import Message, TextPart, ToolCallPart, ToolResultPart
from services.execution.ports import ModelClient, SelfDrivingEngine

Engine = ModelClient | SelfDrivingEngine
DIGEST_MAX_CHARS = 60_000
_PART_MAX_CHARS = 4_000


@dataclass
class ModelFallback:
    """The models still to try, in order, and how to build each one's engine."""

    remaining: list[ModelChoice]
    build: Callable[[ModelChoice], Engine]
    tried: list[ModelChoice] = field(default_factory=list)
    offset: int = 0  # the position in ``models`` of the model the run started with

    def next(self) -> tuple[ModelChoice, Callable[[], Engine]] | None:
        """The next model and a thunk building its engine; ``None`` when none is left."""
        if not self.remaining:
            return None
        choice = self.remaining.pop(0)
        self.tried.append(choice)
        return choice, lambda: self.build(choice)


def resume_position(chain: Sequence[ModelChoice],
                    events: Sequence[tuple[str, dict[str, Any]]]) -> int:
    """Where in ``chain`` a resumed execution starts: after its last recorded fallback."""
    position = 0
    for kind, data in events:
        if kind == "model_fallback" and isinstance(data.get("position"), int):
            position = max(position, int(data["position"]))
    return min(position, max(len(chain) - 1, 0))


@dataclass(frozen=True)
class ModelPlan:
    """The model the run starts with and the fallback behind it."""

    first: ModelChoice
    fallback: ModelFallback | None


def model_plan(chain: Sequence[ModelChoice], events: Sequence[tuple[str, dict[str, Any]]],
               build: Callable[[ModelChoice], Engine]) -> ModelPlan:
    """Where a run starts in ``chain`` (after the journal's last fallback) and the rest."""
    start = resume_position(chain, events)
    rest = list(chain[start + 1:])
    return ModelPlan(chain[start],
                     ModelFallback(rest, build, offset=start) if rest or start else None)


def _clip(text: str, limit: int = _PART_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + " [... truncated]"


def _message_lines(message: Message) -> list[str]:
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text.strip():
            lines.append(f"[{message.role.value}] {_clip(part.text)}")
        elif isinstance(part, ToolCallPart):
            args = json.dumps(part.call.args, ensure_ascii=False, default=str)
            lines.append(f"[tool call {part.call.call_id}] {part.call.tool_name} {_clip(args)}")
        elif isinstance(part, ToolResultPart):
            body = json.dumps(part.envelope, ensure_ascii=False, default=str)
            lines.append(f"[tool result {part.call_id}] {_clip(body)}")
    return lines


def conversation_digest(messages: Sequence[Message]) -> str:
    """The conversation after the task as text (the latest kept when it is long)."""
    lines = [line for m in messages[1:] for line in _message_lines(m)]
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        size += len(line) + 1
        if size > DIGEST_MAX_CHARS:
            kept.append("[... earlier steps left out ...]")
            break
        kept.append(line)
    return "\n".join(reversed(kept))


def session_prompt(task: str, messages: Sequence[Message]) -> str:
    """What a self-driving engine that takes over is asked: the task, then what was done."""
    digest = conversation_digest(messages)
    if not digest:
        return task
    return (f"{task}\n\nAnother model worked on this task before you and became unavailable. "
            "Its steps so far (tool calls and their results) follow; the workspace holds their "
            f"effects. Continue from there.\n\n{digest}")

