"""Context windows and output limits per model, as data beside the prices.

:data:`DEFAULT_WINDOWS` holds each model's context window and its largest answer (tokens), from
the vendors' model pages as of 2025-11-20; a model is looked up like a price (exactly, else by
longest prefix, so dated and path-like ids match their base entry). A model the table does not
know gets its provider's window (``context_window`` of its profile in
:mod:`.providers.profiles`), else :data:`FALLBACK`. The runtime
setting ``context_window_tokens`` (0: the table's) replaces the window of every model, for an
operator who runs a model behind a gateway that cuts it, or a test that wants a small one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelWindow:
    """How many tokens a request (input and answer) may hold, and how long an answer may be."""

    context: int
    max_output: int


DEFAULT_WINDOWS: Mapping[str, ModelWindow] = {
    # OpenAI
    "gpt-5.1": ModelWindow(400_000, 128_000),
    "gpt-5.1-codex": ModelWindow(400_000, 128_000),
    "gpt-5.1-codex-mini": ModelWindow(400_000, 128_000),
    "gpt-5": ModelWindow(400_000, 128_000),
    "gpt-5-codex": ModelWindow(400_000, 128_000),
    "gpt-5-mini": ModelWindow(400_000, 128_000),
    "gpt-5-nano": ModelWindow(400_000, 128_000),
    "gpt-4.1": ModelWindow(1_047_576, 32_768),
    "gpt-4.1-mini": ModelWindow(1_047_576, 32_768),
    "gpt-4.1-nano": ModelWindow(1_047_576, 32_768),
    "gpt-4o": ModelWindow(128_000, 16_384),
    "gpt-4o-mini": ModelWindow(128_000, 16_384),
    "o3": ModelWindow(200_000, 100_000),
    "o4-mini": ModelWindow(200_000, 100_000),
    # Google
    "gemini-3-pro-preview": ModelWindow(1_048_576, 65_536),
    "gemini-2.5-pro": ModelWindow(1_048_576, 65_536),
    "gemini-2.5-flash": ModelWindow(1_048_576, 65_536),
    "gemini-2.5-flash-lite": ModelWindow(1_048_576, 65_536),
    "gemini-2.0-flash": ModelWindow(1_048_576, 8_192),
    # Anthropic
    "claude-opus-4-5": ModelWindow(200_000, 64_000),
    "claude-opus-4-1": ModelWindow(200_000, 32_000),
    "claude-opus-4": ModelWindow(200_000, 32_000),
    "claude-sonnet-4-5": ModelWindow(200_000, 64_000),
    "claude-sonnet-4": ModelWindow(200_000, 64_000),
    "claude-haiku-4-5": ModelWindow(200_000, 64_000),
    "claude-3-5-haiku": ModelWindow(200_000, 8_192),
}

FALLBACK = ModelWindow(128_000, 8_192)


def _entry(model: str, table: Mapping[str, ModelWindow]) -> str | None:
    name = model.lower().rsplit("/", 1)[-1]
    if name in table:
        return name
    for candidate in sorted(table, key=len, reverse=True):
        if name.startswith(candidate) and name[len(candidate)] in "-@:":
            return candidate
    return None


def model_window(model: str, override: int = 0, *, unknown: ModelWindow = FALLBACK,
                 table: Mapping[str, ModelWindow] = DEFAULT_WINDOWS) -> ModelWindow:
    """The window ``model`` works in (``unknown``: a model the table lacks; its provider's);
    ``override`` (> 0) replaces its size."""
    entry = _entry(model, table)
    window = table[entry] if entry is not None else unknown
    if override > 0:
        return ModelWindow(override, min(window.max_output, override))
    return window
