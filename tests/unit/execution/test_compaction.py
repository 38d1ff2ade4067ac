"""Compaction with hysteresis (services.execution.compaction, context_keeper), the per-model
windows, cached and cache-write pricing, and the provider's "too long" as ``context_exhausted``."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from services.execution.compaction import (
    SUMMARY_PROMPT,
    Compaction,
    ContextPolicy,
    apply_compaction,
    envelope_summary,
    turns_in,
)
from services.execution.context_keeper import ContextKeeper
from services.execution.context_windows import FALLBACK, ModelWindow, model_window
from services.execution.conversation import rebuild_messages
from services.execution.errors import ErrorCode
from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from services.execution.outcomes import StopRun
from services.execution.pricing import PriceTable, UsageAccumulator
from services.execution.providers.claude import compaction_of
from services.execution.providers.failures import from_status
from services.execution.providers.profiles import provider_window

BIG = "\n".join(f"line {i}: " + "x" * 70 for i in range(100))  # about 2,000 tokens


def _turn(n: int, output: str = BIG) -> list[Message]:
    call = ToolCall(call_id=f"c{n}", tool_name="workspace_read_file", domain="workspace",
                    operation="read_file", args={"path": f"f{n}.txt"})
    envelope = {"ok": True, "call_id": f"c{n}", "duration_ms": 1.0,
                "result": {"path": f"f{n}.txt", "content": output, "exit_code": 0}}
    return [Message(role=Role.ASSISTANT, parts=[ToolCallPart(call=call)]),
            Message(role=Role.TOOL, parts=[ToolResultPart(call_id=f"c{n}",
                                                          tool_name="workspace_read_file",
                                                          envelope=envelope)])]


def _conversation(turns: int) -> list[Message]:
    messages = [Message(role=Role.USER, parts=[TextPart(text="read the files")])]
    for n in range(turns):
        messages += _turn(n)
    return messages


def _keeper(window: int = 16_000) -> ContextKeeper:
    return ContextKeeper(ContextPolicy(window=window), "system prompt", [], "m")


def _compact(keeper: ContextKeeper, messages: list[Message],
             asked: list[list[Message]]) -> Compaction | None:
    async def summarize(history: list[Message]) -> str:
        asked.append(history)
        return "PLAN: go on"

    return anyio.run(keeper.before_request, messages, "read the files", summarize)


def test_nothing_changes_below_the_high_mark_and_one_step_reaches_the_low_mark() -> None:
    keeper, asked = _keeper(), []
    messages = _conversation(5)  # about 10,500 tokens: under 12,800
    before = list(messages)
    assert _compact(keeper, messages, asked) is None and messages == before and asked == []
    messages += _turn(5) + _turn(6)  # past the high mark
    last_sent = messages[:-2]
    done = _compact(keeper, messages, asked)
    assert done is not None and done.before_tokens > keeper.policy.high_tokens
    assert done.after_tokens == keeper.size(messages) <= keeper.policy.low_tokens
    # the summary request is the last request plus the fixed prompt (a cached prefix)
    assert len(asked) == 1 and asked[0][:-1] == last_sent
    assert asked[0][-1].text == SUMMARY_PROMPT
    assert messages[0].text.startswith("[compacted]") and "read the files" in messages[0].text
    assert messages[-2:] == _turn(6)  # the newest turn is kept whole
    assert turns_in(messages) == 7  # the cycle count survives the summary
    # hysteresis: the next turn does not compact again
    messages += _turn(7)
    assert _compact(keeper, messages, asked) is None and len(asked) == 1


def test_a_recorded_compaction_replays_to_the_same_messages() -> None:
    keeper, asked = _keeper(), []
    original = _conversation(7)
    live = list(original)
    done = _compact(keeper, live, asked)
    assert done is not None
    assert apply_compaction(original, Compaction.from_event(done.to_event())) == live
    # through the journal, as a resume rebuilds it
    events: list[tuple[str, dict[str, Any]]] = [("started", {"task": "read the files"})]
    for message in original[1:]:
        if message.role is Role.ASSISTANT:
            events.append(("model_response", {"message": message.model_dump(mode="json")}))
        else:
            for part in message.parts:
                assert isinstance(part, ToolResultPart)
                call = original[original.index(message) - 1].tool_calls[0]
                events.append(("tool_result", {"call": call.model_dump(mode="json"),
                                               "envelope": part.envelope}))
    events.append(("compaction", done.to_event()))
    assert rebuild_messages(events) == live
    # positive control: without the event the rebuild is the uncompacted conversation
    assert rebuild_messages(events[:-1]) == original


def test_elision_alone_when_it_suffices_keeps_status_paths_and_edges() -> None:
    keeper = ContextKeeper(ContextPolicy(window=16_000, keep_turns=1), "s", [], "m")
    messages = _conversation(7)
    asked: list[list[Message]] = []
    done = _compact(keeper, messages, asked)
    assert done is not None and done.summary is None and asked == []
    assert done.elided == [f"c{n}" for n in range(6)]
    stub = messages[2].parts[0]
    assert isinstance(stub, ToolResultPart) and stub.elided
    result = stub.envelope["result"]
    assert result["path"] == "f0.txt" and result["exit_code"] == 0
    assert result["content"].startswith("line 0:") and "line 99:" in result["content"]
    assert "[... 94 lines elided ...]" in result["content"]
    assert "line 50:" not in result["content"]
    failed = envelope_summary(ToolResultPart(call_id="x", tool_name="t", envelope={
        "ok": False, "error": {"code": "command_timeout", "message": BIG}}))
    assert failed.envelope["error"]["code"] == "command_timeout"


def test_a_window_smaller_than_the_system_prompt_and_tools_is_context_exhausted() -> None:
    keeper = ContextKeeper(ContextPolicy(window=10), "a long system prompt " * 10, [], "tiny")
    with pytest.raises(StopRun) as stop:
        _compact(keeper, _conversation(0), [])
    assert stop.value.code is ErrorCode.CONTEXT_EXHAUSTED
    assert "context window of 10 tokens" in stop.value.message and "'tiny'" in stop.value.message


def test_windows_are_data_per_model_with_the_provider_and_the_setting_as_fallbacks() -> None:
    assert model_window("gpt-5.1-2025-11-13") == ModelWindow(400_000, 128_000)
    assert model_window("models/gemini-2.5-pro").context == 1_048_576
    assert model_window("claude-sonnet-4-5-20250929").context == 200_000
    assert model_window("unknown-model") == FALLBACK
    assert model_window("unknown", unknown=provider_window("gemini")).context == 1_048_576
    assert model_window("gpt-5.1", 16_000) == ModelWindow(16_000, 16_000)


def test_cached_and_cache_write_tokens_are_priced_at_their_rates() -> None:
    prices = PriceTable()
    plain, _ = prices.cost("claude-sonnet-4-5", Usage(input_tokens=1_000_000))
    cached, _ = prices.cost("claude-sonnet-4-5",
                            Usage(input_tokens=1_000_000, cached_input_tokens=1_000_000))
    written, _ = prices.cost("claude-sonnet-4-5",
                             Usage(input_tokens=1_000_000, cache_write_input_tokens=1_000_000))
    assert (plain, cached, written) == (pytest.approx(3.0), pytest.approx(0.3),
                                        pytest.approx(3.75))
    totals = UsageAccumulator(prices)
    totals.add("gpt-5.1", Usage(input_tokens=100, cached_input_tokens=80, output_tokens=5))
    totals.add("gpt-5.1", Usage(input_tokens=100, cached_input_tokens=90, output_tokens=5))
    assert (totals.input_tokens, totals.cached_input_tokens) == (200, 170)


def test_the_providers_too_long_answers_are_context_exhausted_other_400s_are_not() -> None:
    for message in ("Your input exceeds the context window of this model.",
                    "prompt is too long: 210000 tokens > 200000 maximum",
                    "The input token count (1200000) exceeds the maximum number of tokens "
                    "allowed (1048576)."):
        assert from_status("p", 400, message).code is ErrorCode.CONTEXT_EXHAUSTED
    assert from_status("p", 400, "invalid tool schema").code is ErrorCode.PROVIDER_REJECTED


def test_claude_codes_compaction_boundary_is_recorded() -> None:
    assert compaction_of({"compact_metadata": {"trigger": "auto", "pre_tokens": 155_000}}) == \
        {"source": "claude_code", "trigger": "auto", "before_tokens": 155_000}
    assert compaction_of({"compact_metadata": "<b>hostile</b>"}) == \
        {"source": "claude_code", "trigger": "auto", "before_tokens": None}
