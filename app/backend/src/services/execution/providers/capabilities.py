"""The provider capability matrix: what each adapter does, and where each guard acts for it.

One table, read by ``studio providers`` (the CLI prints it), the docs page
``node_executor_runtime`` (which must name every provider and guard, a unit test checks it) and
the conformance table in ``tests/integration/conformance/`` (whose rows assert, per provider,
the behaviour stated here). Changing a guard's site here without changing the loop makes the
conformance table fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

#: The guards of the loop (SPEC §3), in the order the docs list them.
GUARDS: tuple[str, ...] = (
    "max_iterations",
    "max_budget_usd",
    "repository_budget",
    "loop_detection",
    "kill_switch",
    "wall_clock",
    "provider_retries",
    "invalid_arguments",
)

GUARD_TITLES: Mapping[str, str] = {
    "max_iterations": "max_iterations",
    "max_budget_usd": "max_budget_usd (execution budget)",
    "repository_budget": "daily repository budget",
    "loop_detection": "error-loop detection",
    "kill_switch": "kill switch, cancellation",
    "wall_clock": "wall clock, stall",
    "provider_retries": "provider retries",
    "invalid_arguments": "malformed tool arguments",
}

_TURN_BASED_GUARDS: Mapping[str, str] = {
    "max_iterations": "the loop, before each model call: max_iterations_exceeded",
    "max_budget_usd": "the loop, before each model call (cost from the price table, delta "
                      "per call): budget_exceeded",
    "repository_budget": "the loop, before each model call (BudgetPort.check)",
    "loop_detection": "the loop, after each tool call: a user-message warning at 3, "
                      "loop_detected at 5",
    "kill_switch": "the loop, before each model call and each tool call",
    "wall_clock": "the loop, before each model call; each model call is stall-timed",
    "provider_retries": "the loop: at most 3 attempts on 429/5xx/424/connection errors, "
                        "backoff with jitter, Retry-After; SDK retries off; 4xx not retried",
    "invalid_arguments": "the dispatcher answers invalid_arguments as a tool result; the run "
                         "goes on",
}

_CLAUDE_GUARDS: Mapping[str, str] = {
    "max_iterations": "the Claude Code CLI (max_turns); its error_max_turns result becomes "
                      "max_iterations_exceeded",
    "max_budget_usd": "the Claude Code CLI (max_budget_usd, its own cumulative "
                      "total_cost_usd); error_max_budget_usd becomes budget_exceeded",
    "repository_budget": "the loop before the session starts, then the tool gateway at each "
                         "tool call (a stop interrupts the CLI)",
    "loop_detection": "the tool gateway, at each tool call: the warning travels in the tool "
                      "result at 3, loop_detected and interrupt() at 5",
    "kill_switch": "the tool gateway, at each tool call (then interrupt()); a model call "
                   "already in flight is not stopped",
    "wall_clock": "the loop, around the whole session (cancelled when it runs out: stalled)",
    "provider_retries": "the Claude Code CLI (CLAUDE_CODE_MAX_RETRIES, 2 here) on 429/5xx; "
                        "a 400 is re-sent only without an optional anthropic-beta feature, "
                        "then provider_rejected; the loop does not retry over the CLI",
    "invalid_arguments": "the dispatcher answers invalid_arguments as a tool result; the run "
                         "goes on",
}

_REPLAY_GUARDS: Mapping[str, str] = {
    **_TURN_BASED_GUARDS,
    "max_budget_usd": "the loop, before each model call (the cost each scripted turn states)",
    "provider_retries": "not applicable: replay has no wire, so no provider error to retry",
}


@dataclass(frozen=True)
class ProviderCapabilities:
    """One provider's row of the matrix."""

    provider: str
    sdk: str
    wire: str | None  # the API spoken; None: no provider call at all
    tool_calls: bool
    parallel_tool_calls: bool
    streaming: bool
    mcp: bool
    thought_signature: bool
    self_driving_loop: bool
    chat_mode: bool
    base_url_env: str | None
    cost_semantic: str  # "delta" per call, or "cumulative" per session
    guards: Mapping[str, str] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["guards"] = dict(self.guards)
        return data


CAPABILITIES: Mapping[str, ProviderCapabilities] = {
    "codex": ProviderCapabilities(
        provider="codex", sdk="openai", wire="OpenAI Responses (chat mode: Chat Completions)",
        tool_calls=True, parallel_tool_calls=True, streaming=False, mcp=True,
        thought_signature=False, self_driving_loop=False, chat_mode=True,
        base_url_env="OPENAI_BASE_URL", cost_semantic="delta", guards=_TURN_BASED_GUARDS,
    ),
    "gemini": ProviderCapabilities(
        provider="gemini", sdk="google-genai", wire="Gemini generateContent",
        tool_calls=True, parallel_tool_calls=True, streaming=False, mcp=True,
        thought_signature=True, self_driving_loop=False, chat_mode=False,
        base_url_env="GOOGLE_GEMINI_BASE_URL", cost_semantic="delta",
        guards=_TURN_BASED_GUARDS,
    ),
    "claude": ProviderCapabilities(
        provider="claude", sdk="claude-agent-sdk (bundled Claude Code CLI)",
        wire="Anthropic Messages (SSE)", tool_calls=True, parallel_tool_calls=True,
        streaming=True, mcp=True, thought_signature=False, self_driving_loop=True,
        chat_mode=False, base_url_env="ANTHROPIC_BASE_URL", cost_semantic="cumulative",
        guards=_CLAUDE_GUARDS,
    ),
    "replay": ProviderCapabilities(
        provider="replay", sdk="none (a scripted trajectory)", wire=None, tool_calls=True,
        parallel_tool_calls=True, streaming=False, mcp=True, thought_signature=False,
        self_driving_loop=False, chat_mode=False, base_url_env=None, cost_semantic="delta",
        guards=_REPLAY_GUARDS,
    ),
}

#: The boolean capabilities, in the order ``studio providers`` prints them.
FLAGS: tuple[str, ...] = (
    "tool_calls", "parallel_tool_calls", "streaming", "mcp", "thought_signature",
    "self_driving_loop", "chat_mode",
)


def matrix() -> list[dict[str, Any]]:
    """The whole matrix as JSON-ready rows (``studio providers --json``)."""
    return [caps.as_dict() for caps in CAPABILITIES.values()]
