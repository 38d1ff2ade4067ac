"""Price table lookups, overrides and delta/cumulative usage accounting."""

from __future__ import annotations

import pytest

from services.execution.messages import Usage, UsageSemantic
from services.execution.pricing import (
    DEFAULT_PRICES,
    ModelPrice,
    PriceTable,
    UsageAccumulator,
)

M = 1_000_000


@pytest.mark.parametrize("model", ["gpt-5.1", "gpt-5.1-codex", "gpt-5", "gpt-5-mini", "gpt-4.1",
                                   "gpt-4o", "o4-mini", "gemini-2.5-pro", "gemini-2.5-flash",
                                   "gemini-2.5-flash-lite", "gemini-3-pro-preview",
                                   "claude-sonnet-4-5", "claude-opus-4-1", "claude-haiku-4-5"])
def test_current_models_are_priced(model: str) -> None:
    assert model in DEFAULT_PRICES
    usd, known = PriceTable().cost(model, Usage(input_tokens=M, output_tokens=M))
    assert known and usd > 0


@pytest.mark.parametrize(("model", "base"), [
    ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
    ("claude-sonnet-4-20250514", "claude-sonnet-4"),
    ("claude-sonnet-4-5@20250929", "claude-sonnet-4-5"),
    ("gpt-5.1-codex-2025-11-13", "gpt-5.1-codex"),
    ("gpt-5.1-2025-11-13", "gpt-5.1"),
    ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
    ("models/gemini-2.5-flash-lite", "gemini-2.5-flash-lite"),
    ("GPT-5-MINI", "gpt-5-mini"),
])
def test_dated_and_prefixed_ids_match_their_base_entry(model: str, base: str) -> None:
    assert PriceTable().price(model) == DEFAULT_PRICES[base]


@pytest.mark.parametrize("model", ["gpt-5.2", "my-local-llama", "claude", "gpt-5x"])
def test_unknown_models_cost_zero_and_say_so(model: str) -> None:
    assert PriceTable().cost(model, Usage(input_tokens=M, output_tokens=M)) == (0.0, False)


def test_cost_formula_with_cached_input() -> None:
    usage = Usage(input_tokens=2 * M, cached_input_tokens=M, output_tokens=M)
    usd, known = PriceTable().cost("gpt-5.1", usage)
    assert known
    assert usd == pytest.approx(1.25 + 0.125 + 10.0)


def test_overrides_replace_and_extend_the_table() -> None:
    table = PriceTable({"gpt-5.1": {"input": 2, "output": 20},
                        "my-model": ModelPrice(input=1, output=1, cached_input=0.5)})
    assert table.cost("gpt-5.1", Usage(input_tokens=M, cached_input_tokens=M))[0] == 2.0
    assert table.cost("my-model-v2", Usage(input_tokens=M, output_tokens=M)) == (2.0, True)
    assert PriceTable().price("my-model") is None


def test_a_cost_reported_by_the_provider_wins() -> None:
    assert PriceTable().cost("unknown", Usage(cost_usd=0.42)) == (0.42, True)


def test_delta_usage_adds_up() -> None:
    acc = UsageAccumulator(PriceTable())
    for _ in range(3):
        acc.add("gpt-5.1", Usage(input_tokens=M, output_tokens=100_000))
    assert (acc.input_tokens, acc.output_tokens) == (3 * M, 300_000)
    assert acc.cost_usd == pytest.approx(3 * (1.25 + 1.0))
    assert acc.unknown_models == set()


def test_cumulative_usage_adds_only_the_growth() -> None:
    acc = UsageAccumulator(PriceTable())
    cum = UsageSemantic.CUMULATIVE
    first = acc.add("claude-sonnet-4-5", Usage(input_tokens=M, output_tokens=0, semantic=cum))
    second = acc.add("claude-sonnet-4-5", Usage(input_tokens=3 * M, output_tokens=M, semantic=cum))
    assert first.cost_usd == pytest.approx(3.0)
    assert (second.input_tokens, second.output_tokens) == (2 * M, M)
    assert second.cost_usd == pytest.approx(6.0 + 15.0)
    assert acc.input_tokens == 3 * M
    assert acc.cost_usd == pytest.approx(3.0 + 6.0 + 15.0)


def test_cumulative_reported_cost_and_session_restart() -> None:
    acc = UsageAccumulator(PriceTable())
    cum = UsageSemantic.CUMULATIVE
    acc.add("claude-sonnet-4-5", Usage(input_tokens=100, cost_usd=0.5, semantic=cum))
    acc.add("claude-sonnet-4-5", Usage(input_tokens=200, cost_usd=0.75, semantic=cum))
    assert acc.cost_usd == pytest.approx(0.75)
    # a smaller report: a new session began, its numbers are all new
    acc.add("claude-sonnet-4-5", Usage(input_tokens=50, cost_usd=0.1, semantic=cum))
    assert acc.cost_usd == pytest.approx(0.85)
    acc.new_session()
    step = acc.add("claude-sonnet-4-5", Usage(input_tokens=60, cost_usd=0.2, semantic=cum))
    assert step.cost_usd == pytest.approx(0.2)
    assert acc.input_tokens == 200 + 50 + 60


def test_unknown_models_are_collected_for_the_warning() -> None:
    acc = UsageAccumulator(PriceTable())
    step = acc.add("local-model", Usage(input_tokens=10))
    assert not step.known_price and step.cost_usd == 0.0
    assert acc.unknown_models == {"local-model"}
