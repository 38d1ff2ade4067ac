"""The replay provider: a deterministic scripted trajectory (used by ``studio demo``, evals, tests).

Script format (SPEC §3)::

    {"turns": [{"tool_calls": [{"tool": "workspace.write_file", "args": {...}}]},
               ...,
               {"final": "..."}]}

A turn may also carry ``"usage": {"input_tokens": .., "output_tokens": .., "cost_usd": ..}`` so
budget behaviour can be replayed. Calls get deterministic ids ``<cycle>-<index>``. When the
script runs out, the model answers with a final text saying so. A resumed conversation (one that
already holds N model turns) continues at turn N + 1 of the script.

With ``"retry_interrupted": true`` at the top of the script, a call the resumed conversation
answers ``interrupted`` (its attempt died before the call's result was recorded, so the restored
workspace does not hold its effect; the result says ``retryable``) is asked for again, as a model
would, before the script goes on: the retry is a turn of its own (new call ids) that does not
count as a script turn. Without it the script simply goes on (what a model that gives up does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from services.execution.errors import ConfigError, ErrorCode
from services.execution.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    Usage,
    provider_tool_name,
    split_tool_name,
)


class ReplayCall(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class ReplayUsage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class ReplayTurn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tool_calls: list[ReplayCall] | None = None
    final: str | dict[str, Any] | None = None
    usage: ReplayUsage | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ReplayTurn:
        if (self.tool_calls is None) == (self.final is None):
            raise ValueError("a turn has either tool_calls or final")
        return self


class ReplayScript(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turns: list[ReplayTurn]
    retry_interrupted: bool = False


def load_script(source: Path | str | dict[str, Any]) -> ReplayScript:
    """A script from a file, a JSON string or parsed data; a bad script is a ConfigError."""
    try:
        if isinstance(source, dict):
            return ReplayScript.model_validate(source)
        text = source.read_text() if isinstance(source, Path) else source
        return ReplayScript.model_validate(json.loads(text))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"invalid replay script: {exc}") from exc


class ReplayClient:
    """A ModelClient that answers from the script, turn by turn."""

    provider = "replay"

    def __init__(self, script: ReplayScript, model: str = "replay") -> None:
        self.script = script
        self.model = model
        self._next = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        retries = self.script.retry_interrupted
        retry = _interrupted_calls(request.messages) if retries else []
        if retry:
            parts = [ToolCallPart(call=call.model_copy(update={"call_id": f"{request.cycle}-{i}"}))
                     for i, call in enumerate(retry)]
            return ModelResponse(message=Message(role=Role.ASSISTANT, parts=list(parts)),
                                 usage=Usage(cost_usd=0.0), model=self.model,
                                 stop_reason="tool_use")
        # a resumed conversation skips what it holds
        self._next = max(self._next, script_position(request.messages, retries=retries))
        turn = self._take()
        usage = Usage(cost_usd=0.0)  # a replayed model costs nothing unless the script says so
        if turn is not None and turn.usage is not None:
            usage = Usage(input_tokens=turn.usage.input_tokens,
                          output_tokens=turn.usage.output_tokens,
                          cost_usd=turn.usage.cost_usd or 0.0)
        if turn is None or turn.final is not None:
            final = "the replay script has no more turns" if turn is None else turn.final
            text = final if isinstance(final, str) else json.dumps(final)
            message = Message(role=Role.ASSISTANT, parts=[TextPart(text=text)])
            return ModelResponse(message=message, usage=usage, model=self.model,
                                 stop_reason="end_turn")
        parts = [ToolCallPart(call=_call(request.cycle, index, call))
                 for index, call in enumerate(turn.tool_calls or [])]
        return ModelResponse(message=Message(role=Role.ASSISTANT, parts=list(parts)),
                             usage=usage, model=self.model, stop_reason="tool_use")

    def _take(self) -> ReplayTurn | None:
        if self._next >= len(self.script.turns):
            return None
        turn = self.script.turns[self._next]
        self._next += 1
        return turn

    async def aclose(self) -> None:
        return None


def _interrupted(message: Message) -> set[str]:
    """The call ids a tool message answers with a synthetic ``interrupted`` result."""
    if message.role is not Role.TOOL:
        return set()
    return {part.call_id for part in message.parts if isinstance(part, ToolResultPart)
            and (part.envelope.get("error") or {}).get("code") == ErrorCode.INTERRUPTED.value}


def script_position(messages: list[Message], *, retries: bool = True) -> int:
    """How many script turns a conversation holds: its model turns, less (with ``retries``)
    the retries of interrupted calls (a model turn right after a tool message with an
    ``interrupted`` result)."""
    position, after_interrupt = 0, False
    for message in messages:
        if message.role is Role.TOOL:
            after_interrupt = retries and bool(_interrupted(message))
        elif message.role is Role.ASSISTANT:
            position += 0 if after_interrupt else 1
            after_interrupt = False
    return position


def _interrupted_calls(messages: list[Message]) -> list[ToolCall]:
    """The calls to ask for again: those the conversation's last message answers
    ``interrupted``, as the last model turn made them."""
    if not messages:
        return []
    ids = _interrupted(messages[-1])
    turns = [m for m in messages if m.role is Role.ASSISTANT]
    if not ids or not turns:
        return []
    return [call for call in turns[-1].tool_calls if call.call_id in ids]


def _call(cycle: int, index: int, call: ReplayCall) -> ToolCall:
    domain, operation = split_tool_name(call.tool)
    return ToolCall(call_id=f"{cycle}-{index}", tool_name=provider_tool_name(call.tool),
                    domain=domain, operation=operation, args=call.args)
