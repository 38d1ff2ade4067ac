"""Interrupted-call repair, old-output elision and JSON round trips of the neutral messages."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.execution.conversation import (
    TokenCounter,
    elide_old_outputs,
    estimate_tokens,
    repair_interrupted,
)
from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)


def _call(call_id: str) -> ToolCall:
    return ToolCall(call_id=call_id, tool_name="git_status", domain="git", operation="status")


def _assistant(*ids: str) -> Message:
    return Message(role=Role.ASSISTANT, parts=[ToolCallPart(call=_call(i)) for i in ids])


def _results(*ids: str, size: int = 10) -> Message:
    return Message(role=Role.TOOL, parts=[
        ToolResultPart(call_id=i, tool_name="git_status",
                       envelope={"ok": True, "result": {"out": "y" * size}}) for i in ids])


def test_messages_round_trip_through_json() -> None:
    original = [Message(role=Role.USER, parts=[TextPart(text="hi")]), _assistant("a"),
                _results("a")]
    dumped = [m.model_dump(mode="json") for m in original]
    assert [Message.model_validate(d) for d in dumped] == original


def test_missing_results_are_repaired_with_interrupted() -> None:
    history = [Message(role=Role.USER, parts=[TextPart(text="go")]), _assistant("a", "b"),
               _results("a"), _assistant("c")]
    repaired = repair_interrupted(history)
    assert len(repaired) == 5
    by_id = {p.call_id: p for m in repaired for p in m.parts if isinstance(p, ToolResultPart)}
    assert by_id["b"].envelope["error"]["code"] == "interrupted"
    assert by_id["c"].envelope["error"]["code"] == "interrupted"
    assert by_id["a"].envelope["ok"] is True
    assert len(history[2].parts) == 1  # the caller's history is not changed


def test_complete_history_is_left_alone() -> None:
    history = [_assistant("a"), _results("a")]
    assert repair_interrupted(history) == history


def test_old_tool_outputs_are_elided_first_recent_kept() -> None:
    history: list[Message] = []
    for i in range(6):
        history += [_assistant(str(i)), _results(str(i), size=4000)]
    before = sum(estimate_tokens(m) for m in history)
    count = elide_old_outputs(history, token_budget=before // 2)
    assert count >= 1
    assert sum(estimate_tokens(m) for m in history) <= before // 2
    first = history[1].parts[0]
    last = history[-1].parts[0]
    assert isinstance(first, ToolResultPart) and first.elided and "elided" in first.envelope
    assert isinstance(last, ToolResultPart) and not last.elided


def test_no_elision_under_budget() -> None:
    history = [_assistant("a"), _results("a")]
    assert elide_old_outputs(history, token_budget=10_000) == 0


def test_a_journal_rebuilds_the_conversation_the_model_saw() -> None:
    import anyio

    from services.execution.conversation import rebuild_messages
    from tests.unit.execution.loop_fixtures import (
        ScriptedClient,
        build_agent,
        final_turn,
        tool_turn,
    )

    pair = tool_turn(("test_echo", {"text": "a"}), ("test_echo", {"text": "b"}))
    client = ScriptedClient([tool_turn(("test_fail", {})) for _ in range(3)]
                            + [pair, final_turn('{"status": "success"}')])
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as root:
        agent, sink = build_agent(Path(root), client)
        anyio.run(agent.run, "the task")
    rebuilt = rebuild_messages([(e.kind.value, e.data) for e in sink.events])
    assert rebuilt == client.requests[-1].messages + [
        final_turn('{"status": "success"}').message]


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "replace", "drop", "copy", "same"]),
                              st.integers(min_value=0, max_value=20)), max_size=30))
def test_the_token_total_is_the_sum_whatever_the_turns_did(ops: list[tuple[str, int]]) -> None:
    """A counter's total (which adds only new messages when a list extends the last one) is the
    sum of the estimates, whether messages were appended, replaced in place or dropped."""
    counter = TokenCounter()
    history: list[Message] = []
    for op, n in ops:
        if op == "append" or not history:
            history.append(_results(f"c{n}", size=n * 7))
        elif op == "replace":
            history[n % len(history)] = _results("r", size=n)
        elif op == "drop":
            del history[n % len(history)]
        elif op == "copy":
            history = list(history)
        assert counter.total(history) == sum(estimate_tokens(m) for m in history)
