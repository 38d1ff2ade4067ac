"""The script a test hands to the scripted model server: what the fake model answers, step by step.

Steps are vendor-neutral; the server renders each one in the wire format of the API that was
called (OpenAI Responses or Chat, Gemini generateContent, Anthropic Messages). A step is one of:

- ``text("...")``: a final answer;
- ``tool_calls([("name", {...}), ...])``: the model asks for tool calls (ids ``call_1``, ``call_2``,
  ... are assigned by the server; for Gemini, ``thought_signature=b"..."`` puts a
  ``thoughtSignature`` on the first ``functionCall`` part);
- ``error(status, body=None, headers=None)``: an HTTP error (500, 429 with ``Retry-After``, 400...);
- ``hang(seconds, then=None)``: wait (a client timeout fires first, usually), then answer ``then``;
- a callable ``(RequestRecord) -> step``, so a step can react to what the client sent.

Errors and hangs do not complete a model turn: the request that follows is another *attempt* at
the same turn, which is how a test tells "500 then success" from two turns. Steps are taken in
order by every request the server gets, whichever vendor API it calls.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    from tests.support.model_requests import RequestRecord


@dataclass(frozen=True)
class Usage:
    """Token counts reported with a reply; cost and budget tests drive these."""

    input_tokens: int = 100
    output_tokens: int = 20
    cached_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class Text:
    """A final answer."""

    text: str
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class ToolCall:
    """One tool call as the model asks for it."""

    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class ToolCalls:
    """The model asks for one or more tool calls, optionally with some text before them."""

    calls: tuple[ToolCall, ...]
    text: str | None = None
    thought_signature: bytes | None = None
    gemini_call_ids: bool = False
    usage: Usage = field(default_factory=Usage)


@dataclass(frozen=True)
class Error:
    """An HTTP error reply; ``body`` None means the vendor's usual error JSON."""

    status: int
    body: Mapping[str, Any] | str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` (cut short when the server stops), then answer ``then``."""

    seconds: float
    then: Reply | None = None


Reply: TypeAlias = Text | ToolCalls | Error | Hang
Step: TypeAlias = Reply | Callable[["RequestRecord"], Reply]
Script: TypeAlias = Iterable[Step]


def text(answer: str, *, usage: Usage | None = None) -> Text:
    """A final answer."""
    return Text(answer, usage or Usage())


def tool_calls(
    calls: Iterable[tuple[str, Mapping[str, Any]]],
    *,
    text: str | None = None,
    thought_signature: bytes | None = None,
    gemini_call_ids: bool = False,
    usage: Usage | None = None,
) -> ToolCalls:
    """The model asks for the given ``(name, arguments)`` tool calls."""
    return ToolCalls(
        calls=tuple(ToolCall(name, dict(args)) for name, args in calls),
        text=text,
        thought_signature=thought_signature,
        gemini_call_ids=gemini_call_ids,
        usage=usage or Usage(),
    )


def error(
    status: int,
    body: Mapping[str, Any] | str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Error:
    """An HTTP error reply."""
    return Error(status, body, dict(headers or {}))


def hang(seconds: float, then: Reply | None = None) -> Hang:
    """Hold the request for ``seconds`` before answering ``then`` (default: the fallback text)."""
    return Hang(seconds, then)
