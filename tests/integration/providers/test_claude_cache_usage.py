"""Claude Code's prompt-cache usage, read from its result and counted like the other providers':
the scripted Anthropic double reports the prefix a request shares with an earlier one as
``cache_read_input_tokens`` (tests/support/model_context.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.execution.pricing import PriceTable, UsageAccumulator
from tests.integration.providers.test_claude_engine import (
    READ,
    READ_CALL,
    RecordingGateway,
    dirs,
    make_engine,
)
from tests.support.model_context import ContextMeter
from tests.support.model_server import ScriptedModelServer, text

__all__ = ["dirs"]  # the fixture, shared with test_claude_engine


def test_claude_codes_cache_reads_are_counted_and_priced_at_the_cached_rate(
        dirs: dict[str, Path]) -> None:
    meter = ContextMeter()
    with ScriptedModelServer([READ_CALL, text("README says hello")], meter=meter) as server:
        outcome = asyncio.run(make_engine(server, dirs).run_session(
            system="You are a test agent. " + "Follow the house rules. " * 400,  # > 1,024
            prompt="Read README.md, then answer.", tools=[READ], gateway=RecordingGateway(),
            max_turns=4, max_budget_usd=1.0))
    measured = meter.accepted()
    assert len(measured) == 2 and measured[0].cached == 0
    # witness: the second request's repeated prefix (system prompt, tools, first turn) was
    # reported as cache reads, and the session's usage carries them, inside its input tokens
    assert measured[1].cached > 0
    assert outcome.usage.cached_input_tokens == meter.cached_tokens()
    assert outcome.usage.input_tokens == meter.input_tokens()
    totals = UsageAccumulator(PriceTable(overrides={
        "claude-sonnet-4-5": {"input": 3.0, "output": 15.0, "cached_input": 0.3}}))
    step = totals.add("claude-sonnet-4-5", outcome.usage)
    cached, total = meter.cached_tokens(), meter.input_tokens()
    expected = (total - cached) * 3.0 + cached * 0.3 + outcome.usage.output_tokens * 15.0
    assert step.cost_usd * 1e6 == pytest.approx(expected)  # cache reads at the cached rate
    assert totals.cached_input_tokens == meter.cached_tokens()
