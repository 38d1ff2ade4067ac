"""Model prices and usage accounting: what a turn cost, and the running total of an execution.

Prices are USD per million tokens: input, cached input (prompt-cache reads), output, and cache
writes (Anthropic bills the tokens it writes to its cache at 1.25 times input). Neutral
:class:`~services.execution.messages.Usage` counts ``input_tokens`` *including* the cached ones
(``cached_input_tokens`` is the part of them read from the cache, ``cache_write_input_tokens``
the part written to it), so a turn costs::

    (input - cached - written) * input + cached * cached_input + written * cache_write
        + output * output                                                  (per 1M tokens)

The shipped table holds the vendors' public list prices (standard tier, prompts under 200k tokens
where the price is tiered) as of 2025-11-20. Configuration overrides or extends it
(``STUDIO_MODEL_PRICES``): the composition root passes a mapping, this module reads no
environment; an overridden model's price also replaces a cost its provider reports itself.
Dated model ids
(``claude-sonnet-4-5-20250929``, ``gpt-5.1-2025-11-13``) and path-like ids
(``models/gemini-2.5-pro``) match their base entry by longest prefix. An unknown model costs 0 and
is reported as unknown (the loop emits the warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.execution.messages import Usage, UsageSemantic

_PER_TOKEN = 1_000_000


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens."""

    input: float
    output: float
    cached_input: float | None = None  # None: cached input costs as much as input
    cache_write: float | None = None  # None: a cache write costs as much as input

    @classmethod
    def from_config(cls, value: ModelPrice | Mapping[str, Any]) -> ModelPrice:
        if isinstance(value, ModelPrice):
            return value
        cached = value.get("cached_input")
        write = value.get("cache_write")
        return cls(
            input=float(value["input"]),
            output=float(value["output"]),
            cached_input=None if cached is None else float(cached),
            cache_write=None if write is None else float(write),
        )


# List prices, USD per 1M tokens, checked 2025-11-20 (openai.com/api/pricing,
# ai.google.dev/gemini-api/docs/pricing, claude.com/pricing).
DEFAULT_PRICES: dict[str, ModelPrice] = {
    # OpenAI
    "gpt-5.1": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5.1-codex": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5.1-codex-mini": ModelPrice(0.25, 2.00, 0.025),
    "gpt-5": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5-codex": ModelPrice(1.25, 10.00, 0.125),
    "gpt-5-mini": ModelPrice(0.25, 2.00, 0.025),
    "gpt-5-nano": ModelPrice(0.05, 0.40, 0.005),
    "gpt-4.1": ModelPrice(2.00, 8.00, 0.50),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, 0.10),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, 0.025),
    "gpt-4o": ModelPrice(2.50, 10.00, 1.25),
    "gpt-4o-mini": ModelPrice(0.15, 0.60, 0.075),
    "o3": ModelPrice(2.00, 8.00, 0.50),
    "o4-mini": ModelPrice(1.10, 4.40, 0.275),
    # Google (Gemini API, prompts <= 200k tokens)
    "gemini-3-pro-preview": ModelPrice(2.00, 12.00, 0.20),
    "gemini-2.5-pro": ModelPrice(1.25, 10.00, 0.125),
    "gemini-2.5-flash": ModelPrice(0.30, 2.50, 0.03),
    "gemini-2.5-flash-lite": ModelPrice(0.10, 0.40, 0.01),
    "gemini-2.0-flash": ModelPrice(0.10, 0.40, 0.025),
    # Anthropic (cache reads at 0.1x input, cache writes (5 minutes) at 1.25x)
    "claude-opus-4-5": ModelPrice(5.00, 25.00, 0.50, 6.25),
    "claude-opus-4-1": ModelPrice(15.00, 75.00, 1.50, 18.75),
    "claude-opus-4": ModelPrice(15.00, 75.00, 1.50, 18.75),
    "claude-sonnet-4-5": ModelPrice(3.00, 15.00, 0.30, 3.75),
    "claude-sonnet-4": ModelPrice(3.00, 15.00, 0.30, 3.75),
    "claude-haiku-4-5": ModelPrice(1.00, 5.00, 0.10, 1.25),
    "claude-3-5-haiku": ModelPrice(0.80, 4.00, 0.08, 1.00),
}


class PriceTable:
    """The shipped prices plus configured overrides; looks a model up by longest prefix."""

    def __init__(
        self, overrides: Mapping[str, ModelPrice | Mapping[str, Any]] | None = None,
        *, defaults: Mapping[str, ModelPrice] = DEFAULT_PRICES,
    ) -> None:
        self._prices = dict(defaults)
        self._overridden: set[str] = set()
        for name, price in (overrides or {}).items():
            self._prices[name.lower()] = ModelPrice.from_config(price)
            self._overridden.add(name.lower())
        # longest first, so "gpt-5.1-codex" wins over "gpt-5.1" and "gpt-5"
        self._names = sorted(self._prices, key=len, reverse=True)

    def _entry(self, model: str) -> str | None:
        """The table entry ``model`` matches (exactly, else by longest prefix)."""
        name = model.lower().rsplit("/", 1)[-1]
        if name in self._prices:
            return name
        for candidate in self._names:
            if name.startswith(candidate) and name[len(candidate)] in "-@:":
                return candidate
        return None

    def price(self, model: str) -> ModelPrice | None:
        entry = self._entry(model)
        return self._prices[entry] if entry is not None else None

    def overridden(self, model: str) -> bool:
        """Whether ``model`` is priced by a configured override (``STUDIO_MODEL_PRICES``)."""
        return self._entry(model) in self._overridden

    def describe(self, model: str) -> dict[str, Any] | None:
        """The price ``model`` is counted at and where it comes from (``override`` or
        ``list``), for the usage records; ``None`` for an unknown model."""
        entry = self._entry(model)
        if entry is None:
            return None
        price = self._prices[entry]
        return {"entry": entry, "input": price.input, "output": price.output,
                "cached_input": price.cached_input, "cache_write": price.cache_write,
                "source": "override" if entry in self._overridden else "list"}

    def cost(self, model: str, usage: Usage) -> tuple[float, bool]:
        """``(usd, known)`` for one usage record; an unknown model costs 0 and ``known`` is False.

        A cost the provider reported itself (``usage.cost_usd``) is taken as is, unless a
        configured override prices the model: the override wins.
        """
        if usage.cost_usd is not None and not self.overridden(model):
            return usage.cost_usd, True
        price = self.price(model)
        if price is None:
            return 0.0, False
        return token_cost(price, usage.input_tokens, usage.cached_input_tokens,
                          usage.output_tokens, usage.cache_write_input_tokens), True


def token_cost(price: ModelPrice, input_tokens: int, cached: int, output_tokens: int,
               written: int = 0) -> float:
    input_tokens = max(input_tokens, 0)
    cached = min(max(cached, 0), input_tokens)
    written = min(max(written, 0), input_tokens - cached)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    write_rate = price.input if price.cache_write is None else price.cache_write
    usd = (
        (input_tokens - cached - written) * price.input
        + cached * cached_rate
        + written * write_rate
        + output_tokens * price.output
    )
    return usd / _PER_TOKEN


@dataclass(frozen=True)
class UsageStep:
    """What one usage report added to the execution's totals."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int
    cost_usd: float
    known_price: bool
    cache_write_input_tokens: int = 0


@dataclass
class UsageAccumulator:
    """Running totals of an execution, whatever each engine's semantic.

    ``DELTA`` reports (codex, gemini) cover one call and are added. ``CUMULATIVE`` reports (the
    Claude Agent SDK) cover the session so far: only the growth since the previous report is added;
    a report smaller than the previous one starts a new session (its numbers are all new). Call
    :meth:`new_session` when a new cumulative session starts on purpose (after a resume).
    """

    prices: PriceTable
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0
    cost_usd: float = 0.0
    unknown_models: set[str] = field(default_factory=set)
    _last: tuple[int, int, int, float, int] | None = None

    def add(self, model: str, usage: Usage) -> UsageStep:
        if usage.semantic is UsageSemantic.CUMULATIVE:
            step = self._cumulative_step(model, usage)
        else:
            usd, known = self.prices.cost(model, usage)
            step = UsageStep(usage.input_tokens, usage.output_tokens,
                             usage.cached_input_tokens, usd, known,
                             usage.cache_write_input_tokens)
        if not step.known_price:
            self.unknown_models.add(model)
        self.input_tokens += step.input_tokens
        self.output_tokens += step.output_tokens
        self.cached_input_tokens += step.cached_input_tokens
        self.cache_write_input_tokens += step.cache_write_input_tokens
        self.cost_usd += step.cost_usd
        return step

    def new_session(self) -> None:
        self._last = None

    def _cumulative_step(self, model: str, usage: Usage) -> UsageStep:
        usd_total, known = self.prices.cost(model, usage)
        now = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usd_total,
               usage.cache_write_input_tokens)
        last = self._last
        self._last = now
        if last is None or any(n < p for n, p in zip(now, last, strict=True)):
            return UsageStep(now[0], now[1], now[2], now[3], known, now[4])
        return UsageStep(now[0] - last[0], now[1] - last[1], now[2] - last[2], now[3] - last[3],
                         known, now[4] - last[4])
