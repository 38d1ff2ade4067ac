"""FrontierAgent's loop against a scripted ModelClient: guards, retries and outcomes."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from services.execution.errors import ErrorCode, ProviderRejected, ProviderUnavailable
from services.execution.guards import AgentLimits
from services.execution.messages import ModelRequest, ModelResponse, Role, ToolResultPart
from services.execution.outcomes import Outcome
from services.execution.ports import AgentEventKind
from tests.unit.execution.loop_fixtures import (
    FlagControl,
    ScriptedClient,
    build_agent,
    final_turn,
    tool_turn,
)

DONE = json.dumps({"status": "success", "summary": "all good", "changes": ["a"]})


def run(agent, prompt="do it"):  # type: ignore[no-untyped-def]
    return anyio.run(agent.run, prompt)


def test_single_tool_call_then_final_answer(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"text": "hi"})), final_turn(DONE)])
    agent, sink = build_agent(workspace, client)
    result = run(agent)
    assert result.outcome is Outcome.FINISHED
    assert result.status == "success" and result.result.summary == "all good"
    assert result.parsed_result and result.iterations == 2
    kinds = [e.kind for e in sink.events]
    assert kinds[0] is AgentEventKind.STARTED and kinds[-1] is AgentEventKind.FINISHED
    assert kinds.count(AgentEventKind.TOOL_CALL) == 1
    second = client.requests[1]
    tool_message = second.messages[-1]
    assert tool_message.role is Role.TOOL
    part = tool_message.parts[0]
    assert isinstance(part, ToolResultPart) and part.envelope["result"] == {"echo": "hi"}
    assert second.messages[-2].role is Role.ASSISTANT  # the model's own tool-call turn kept
    assert "test_echo" in second.system and "summary" in second.system


def test_tool_error_goes_back_to_the_model_and_run_continues(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_fail", {})), tool_turn(("test_echo", {"text": "x"})),
                             final_turn(DONE)])
    result = run(build_agent(workspace, client)[0])
    assert result.outcome is Outcome.FINISHED
    error_part = client.requests[1].messages[-1].parts[0]
    assert isinstance(error_part, ToolResultPart) and error_part.is_error
    assert error_part.envelope["error"]["code"] == "path_not_found"


def test_malformed_arguments_answered_with_invalid_arguments(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"__raw_arguments__": "{not json"})),
                             final_turn(DONE)])
    result = run(build_agent(workspace, client)[0])
    assert result.outcome is Outcome.FINISHED
    part = client.requests[1].messages[-1].parts[0]
    assert isinstance(part, ToolResultPart)
    assert part.envelope["error"]["code"] == "invalid_arguments"


def test_unknown_tool_is_an_error_result_not_a_crash(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("nope_missing", {})), final_turn(DONE)])
    result = run(build_agent(workspace, client)[0])
    part = client.requests[1].messages[-1].parts[0]
    assert isinstance(part, ToolResultPart) and part.envelope["error"]["code"] == "unknown_tool"
    assert result.outcome is Outcome.FINISHED


def test_max_iterations_stop(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"text": str(i)})) for i in range(10)])
    result = run(build_agent(workspace, client, limits=AgentLimits(max_iterations=3))[0])
    assert result.outcome is Outcome.MAX_ITERATIONS_EXCEEDED
    assert result.status == "failed" and len(client.requests) == 3


def test_budget_stop_before_the_next_model_call(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"text": str(i)}), cost=0.6)
                             for i in range(10)])
    result = run(build_agent(workspace, client, limits=AgentLimits(max_budget_usd=1.0))[0])
    assert result.outcome is Outcome.BUDGET_EXCEEDED
    assert len(client.requests) == 2 and result.usage.cost_usd == pytest.approx(1.2)


def test_loop_detection_warns_at_three_and_stops_at_five(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_fail", {})) for _ in range(10)])
    agent, sink = build_agent(workspace, client)
    result = run(agent)
    assert result.outcome is Outcome.LOOP_DETECTED
    assert len(client.requests) == 5
    warnings = [e for e in sink.of_kind(AgentEventKind.WARNING)
                if e.data["code"] == "loop_warning"]
    assert len(warnings) == 2  # at the 3rd and the 4th repetition
    fourth_request = client.requests[3]
    assert fourth_request.messages[-1].role is Role.USER
    assert "same arguments 3 times" in fourth_request.messages[-1].text


def test_different_outcomes_are_not_a_loop(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"text": str(i % 2)})) for i in range(8)]
                            + [final_turn(DONE)])
    result = run(build_agent(workspace, client)[0])
    # echo "0" and "1" alternate: each repeats 4 times in 8 calls -> warned, never stopped
    assert result.outcome is Outcome.FINISHED


def test_kill_switch_between_cycles(workspace: Path) -> None:
    control = FlagControl()

    def engage(request: ModelRequest) -> ModelResponse:
        control.code = ErrorCode.KILLSWITCH_ENGAGED
        return tool_turn(("test_echo", {"text": "late"}))

    client = ScriptedClient([tool_turn(("test_echo", {"text": "a"})), engage,
                             tool_turn(("test_echo", {"text": "b"}))])
    agent, sink = build_agent(workspace, client, control=control)
    result = run(agent)
    assert result.outcome is Outcome.KILLSWITCH_ENGAGED
    assert len(client.requests) == 2
    # the tool call of the second turn was never dispatched
    assert [e.data["call"]["args"] for e in sink.of_kind(AgentEventKind.TOOL_CALL)] == [
        {"text": "a"}]


def test_provider_unavailable_is_retried_with_backoff(workspace: Path) -> None:
    sleeps: list[float] = []
    client = ScriptedClient([ProviderUnavailable("HTTP 500"),
                             ProviderUnavailable("HTTP 429", details={"retry_after": 7}),
                             final_turn(DONE)])
    result = run(build_agent(workspace, client, sleeps=sleeps)[0])
    assert result.outcome is Outcome.FINISHED and len(client.requests) == 3
    assert 0.25 <= sleeps[0] <= 0.5 and sleeps[1] == 7


def test_retries_stop_after_three_attempts(workspace: Path) -> None:
    client = ScriptedClient([ProviderUnavailable("HTTP 503")] * 5)
    result = run(build_agent(workspace, client)[0])
    assert result.outcome is Outcome.ERROR and len(client.requests) == 3
    assert result.error == {"code": "provider_unavailable", "message": "HTTP 503"}


def test_rejected_request_is_not_retried(workspace: Path) -> None:
    client = ScriptedClient([ProviderRejected("HTTP 400: bad request"), final_turn(DONE)])
    result = run(build_agent(workspace, client)[0])
    assert result.outcome is Outcome.ERROR and len(client.requests) == 1
    assert result.error is not None and result.error["code"] == "provider_rejected"


def test_final_answer_that_is_not_json_falls_back_to_text(workspace: Path) -> None:
    client = ScriptedClient([final_turn("I fixed the bug, tests pass.")])
    result = run(build_agent(workspace, client)[0])
    assert result.outcome is Outcome.FINISHED and not result.parsed_result
    assert result.status == "partial" and result.result.summary == "I fixed the bug, tests pass."


def test_stalled_provider_call_ends_with_stalled(workspace: Path) -> None:
    class Hanging(ScriptedClient):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            await anyio.sleep(30)
            raise AssertionError("not reached")

    result = run(build_agent(workspace, Hanging([]), limits=AgentLimits(stall_s=0.2))[0])
    assert result.outcome is Outcome.STALLED


def test_repository_instructions_join_the_system_prompt(workspace: Path) -> None:
    (workspace / "AGENTS.md").write_text("Always run make check.\n" + "x" * 40000)
    client = ScriptedClient([final_turn(DONE)])
    run(build_agent(workspace, client)[0])
    system = client.requests[0].system
    assert "Always run make check." in system and "truncated" in system
    assert len(system) < 30000


def test_events_carry_usage_and_finished_outcome(workspace: Path) -> None:
    client = ScriptedClient([final_turn(DONE)])
    agent, sink = build_agent(workspace, client)
    run(agent)
    usage = sink.of_kind(AgentEventKind.USAGE)[0].data
    assert usage["delta"]["input_tokens"] == 10 and usage["semantic"] == "delta"
    finished = sink.of_kind(AgentEventKind.FINISHED)[0].data
    assert finished["outcome"] == "finished" and finished["status"] == "success"
    warnings = [e.data["code"] for e in sink.of_kind(AgentEventKind.WARNING)]
    assert "unknown_model_price" in warnings  # "scripted" has no price: costs 0, with a warning


def test_limits_are_read_fresh_before_every_model_call(workspace: Path) -> None:
    client = ScriptedClient([tool_turn(("test_echo", {"text": str(i)})) for i in range(10)])
    agent, _ = build_agent(workspace, client)
    reads: list[int] = []

    def refresh() -> AgentLimits:
        reads.append(1)
        return AgentLimits(max_iterations=2 if len(reads) > 1 else 24)

    agent.deps.refresh_limits = refresh
    result = run(agent)
    assert result.outcome is Outcome.MAX_ITERATIONS_EXCEEDED and len(client.requests) == 2


def test_a_resumed_execution_keeps_counting_its_budget(workspace: Path) -> None:
    from services.execution.conversation import recorded_usage
    from services.execution.outcomes import UsageTotals

    client = ScriptedClient([tool_turn(("test_echo", {"text": str(i)}), cost=0.6)
                             for i in range(10)])
    agent, _ = build_agent(workspace, client, limits=AgentLimits(max_budget_usd=2.0))
    agent.deps.spent = UsageTotals(input_tokens=50, output_tokens=5, cost_usd=1.5)
    fresh = type(agent)(client, agent.deps)  # spent is read when the agent is built
    result = run(fresh)
    assert result.outcome is Outcome.BUDGET_EXCEEDED and len(client.requests) == 1
    assert result.usage.cost_usd == pytest.approx(2.1) and result.usage.input_tokens == 60
    assert recorded_usage([("usage", {"total": {"cost_usd": 1.0}}),
                           ("usage", {"total": {"cost_usd": 2.0}}),
                           ("tool_call", {})]) == {"cost_usd": 2.0}
    assert recorded_usage([("started", {})]) is None
