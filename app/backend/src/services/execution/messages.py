"""Neutral message types shared by every provider adapter, the loop and the tool domains.

Everything here round-trips through JSON (``model_dump(mode="json")`` / ``model_validate``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ToolCall(BaseModel):
    """One tool call, normalized: the provider-facing ``tool_name`` is ``<domain>_<operation>``."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool_name: str
    domain: str
    operation: str
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def dotted_name(self) -> str:
        """The name as the CLI and the docs spell it: ``<domain>.<operation>``."""
        return f"{self.domain}.{self.operation}"


class TextPart(BaseModel):
    model_config = ConfigDict(frozen=True)

    type: Literal["text"] = "text"
    text: str


class ToolCallPart(BaseModel):
    """A tool call as the model made it; ``provider_meta`` keeps what the vendor needs echoed back
    (Gemini's ``thought_signature``, an OpenAI item id, ...)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["tool_call"] = "tool_call"
    call: ToolCall
    provider_meta: dict[str, Any] = Field(default_factory=dict)


class ToolResultPart(BaseModel):
    """The answer to one tool call: the envelope as JSON data."""

    model_config = ConfigDict(frozen=True)

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    tool_name: str
    envelope: dict[str, Any]
    is_error: bool = False
    elided: bool = False


Part = Annotated[TextPart | ToolCallPart | ToolResultPart, Field(discriminator="type")]


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Message(BaseModel):
    """One conversation turn in the neutral form every adapter translates to and from.

    Frozen, and never changed in place once in a conversation: whoever changes a turn (elision,
    repair) puts a new object in its place, which is how adapters know what to convert again.
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    parts: list[Part] = Field(default_factory=list)
    provider_meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [p.call for p in self.parts if isinstance(p, ToolCallPart)]


class UsageSemantic(StrEnum):
    DELTA = "delta"  # the numbers cover this call only
    CUMULATIVE = "cumulative"  # the numbers cover the session so far (Claude Agent SDK)


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0  # read from the prompt cache (part of input_tokens)
    cache_write_input_tokens: int = 0  # written to the prompt cache (part of input_tokens)
    cost_usd: float | None = None  # set when the provider reports a cost itself
    semantic: UsageSemantic = UsageSemantic.DELTA


class ToolSchema(BaseModel):
    """A tool as declared to providers, with its neutral JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]


class ModelRequest(BaseModel):
    system: str
    messages: list[Message]
    tools: list[ToolSchema]
    cycle: int = 0
    # the same for every request of an execution (OpenAI's prompt_cache_key routes them together)
    cache_key: str | None = None


class ModelResponse(BaseModel):
    """What a turn-based provider answered, already in neutral form."""

    message: Message
    usage: Usage = Field(default_factory=Usage)
    model: str = ""
    stop_reason: str = ""
    response_id: str | None = None


class AgentStatus(StrEnum):
    SUCCESS = "success"
    PARTIAL = "partial"
    FAILED = "failed"
    BLOCKED = "blocked"


class AgentResult(BaseModel):
    """The final answer the model is asked for (parsed, with a plain-text fallback)."""

    status: AgentStatus = AgentStatus.SUCCESS
    summary: str = ""
    changes: list[str] = Field(default_factory=list)
    issues: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list)
    pr_url: str | None = None


def split_tool_name(name: str) -> tuple[str, str]:
    """``(domain, operation)`` of a provider-facing or dotted tool name.

    ``workspace_read_file`` and ``workspace.read_file`` give ``("workspace", "read_file")``;
    ``mcp__server__tool`` gives ``("mcp", "server__tool")``.
    """
    if name.startswith("mcp__"):
        return "mcp", name[len("mcp__") :]
    if "." in name:
        domain, _, operation = name.partition(".")
    else:
        domain, _, operation = name.partition("_")
    return domain, operation


def provider_tool_name(name: str) -> str:
    """The provider-facing spelling of a (possibly dotted) tool name."""
    domain, operation = split_tool_name(name)
    return f"mcp__{operation}" if domain == "mcp" else f"{domain}_{operation}"


def same_prefix(messages: Sequence[Message], earlier: Sequence[Message]) -> int:
    """How many leading messages of ``messages`` are the very objects (``is``) of ``earlier``: a
    turn appends to the conversation, so a cache keyed on the last list reuses that prefix."""
    same = 0
    for new, old in zip(messages, earlier, strict=False):
        if new is not old:
            break
        same += 1
    return same
