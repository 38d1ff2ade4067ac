"""The replay script format, the loop detector and the retry policy."""

from __future__ import annotations

import random

import anyio
import pytest

from services.execution.conversation import repair_interrupted
from services.execution.errors import ConfigError
from services.execution.guards import LoopDetector, LoopVerdict, RetryPolicy
from services.execution.messages import (
    Message,
    ModelRequest,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
)
from services.execution.providers.replay import ReplayClient, load_script, script_position


def test_replay_script_turns_become_tool_calls_with_deterministic_ids() -> None:
    script = load_script({"turns": [
        {"tool_calls": [{"tool": "workspace.write_file", "args": {"path": "a", "content": "b"}},
                        {"tool": "mcp__srv__echo", "args": {}}]},
        {"final": {"status": "success", "summary": "ok"}},
    ]})
    client = ReplayClient(script)
    first = anyio.run(client.complete, ModelRequest(system="", messages=[], tools=[], cycle=4))
    calls = first.message.tool_calls
    assert [c.call_id for c in calls] == ["4-0", "4-1"]
    assert (calls[0].tool_name, calls[0].domain, calls[0].operation) == (
        "workspace_write_file", "workspace", "write_file")
    assert (calls[1].tool_name, calls[1].domain) == ("mcp__srv__echo", "mcp")
    final = anyio.run(client.complete, ModelRequest(system="", messages=[], tools=[], cycle=5))
    assert '"status": "success"' in final.message.text
    exhausted = anyio.run(client.complete, ModelRequest(system="", messages=[], tools=[]))
    assert "no more turns" in exhausted.message.text


@pytest.mark.parametrize("bad", [
    {"turns": [{"tool_calls": [], "final": "x"}]},
    {"turns": [{}]},
    {"turns": [{"tool_calls": [{"tool": "x", "bogus": 1}]}]},
    {"nope": []},
    "not json",
])
def test_bad_replay_scripts_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError):
        load_script(bad)  # type: ignore[arg-type]


def _call(args: dict[str, object]) -> ToolCall:
    return ToolCall(call_id="1", tool_name="command_run", domain="command", operation="run",
                    args=args)


def test_timed_out_commands_never_count_as_a_loop() -> None:
    detector = LoopDetector()
    envelope = {"ok": True, "result": {"timed_out": True, "exit_code": None}}
    verdicts = [detector.observe(_call({"argv": ["sleep", "999"]}), envelope)[0]
                for _ in range(8)]
    assert set(verdicts) == {LoopVerdict.OK}


def test_changing_output_is_not_a_loop_but_same_output_is() -> None:
    detector = LoopDetector()
    polled = [detector.observe(_call({"command": "cat log"}),
                               {"ok": True, "result": {"stdout": f"line {i}", "duration_ms": i}})
              for i in range(6)]
    assert {v for v, _ in polled} == {LoopVerdict.OK}
    same = [detector.observe(_call({"command": "pytest"}),
                             {"ok": True, "result": {"stdout": "1 failed", "duration_ms": i}})[0]
            for i in range(5)]
    assert same == [LoopVerdict.OK, LoopVerdict.OK, LoopVerdict.WARN, LoopVerdict.WARN,
                    LoopVerdict.STOP]


def test_window_forgets_old_calls() -> None:
    detector = LoopDetector(window=10)
    same = {"ok": False, "error": {"code": "path_not_found", "message": "x"}}
    for _ in range(2):
        detector.observe(_call({"a": 1}), same)
    for i in range(10):
        detector.observe(_call({"b": i}), {"ok": True, "result": {}})
    assert detector.observe(_call({"a": 1}), same)[0] is LoopVerdict.OK


def test_retry_delays_grow_and_honour_retry_after() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0)
    rng = random.Random(1)
    assert 0.5 <= policy.delay(1, None, rng) <= 1.0
    assert 1.0 <= policy.delay(2, None, rng) <= 2.0
    assert 2.5 <= policy.delay(5, None, rng) <= 5.0
    assert policy.delay(1, 3.0, rng) == 3.0
    assert policy.delay(1, 60.0, rng) == 5.0


def _turn(*calls: ToolCall) -> Message:
    return Message(role=Role.ASSISTANT, parts=[ToolCallPart(call=c) for c in calls])


def _ok(*calls: ToolCall) -> Message:
    return Message(role=Role.TOOL, parts=[ToolResultPart(
        call_id=c.call_id, tool_name=c.tool_name, envelope={"ok": True}) for c in calls])


def test_a_resumed_replay_asks_again_for_calls_answered_interrupted() -> None:
    script = load_script({"retry_interrupted": True, "turns": [
        {"tool_calls": [{"tool": "workspace.read_file", "args": {"path": "a.py"}}]},
        {"tool_calls": [{"tool": "workspace.read_file", "args": {"path": "b.py"}},
                        {"tool": "workspace.edit_file",
                         "args": {"path": "a.py", "old_text": "-", "new_text": "+"}}]},
        {"final": "done"},
    ]})
    first = ReplayClient(script)
    read = anyio.run(first.complete, ModelRequest(system="", messages=[], tools=[], cycle=0))
    pair = anyio.run(first.complete, ModelRequest(system="", messages=[], tools=[], cycle=1))
    [read_a], [read_b, edit] = read.message.tool_calls, pair.message.tool_calls
    # the attempt died after read_b's result was recorded, before edit's: the resume repairs it
    history = repair_interrupted([Message(role=Role.USER, parts=[TextPart(text="task")]),
                                  read.message, _ok(read_a), pair.message, _ok(read_b)])
    assert script_position(history) == 2
    resumed = ReplayClient(script)  # a new process
    retry = anyio.run(resumed.complete, ModelRequest(system="", messages=history, tools=[],
                                                     cycle=2)).message.tool_calls
    assert [(c.call_id, c.operation, c.args) for c in retry] == [("2-0", "edit_file", edit.args)]
    # the retry is no script turn: the script goes on where it was
    interrupted_again = repair_interrupted([*history, _turn(*retry)])
    assert script_position(interrupted_again) == 2
    again = anyio.run(ReplayClient(script).complete, ModelRequest(
        system="", messages=interrupted_again, tools=[], cycle=3)).message.tool_calls
    assert [(c.call_id, c.args) for c in again] == [("3-0", edit.args)]
    done = [*interrupted_again, _turn(*again), _ok(*again)]
    final = anyio.run(ReplayClient(script).complete,
                      ModelRequest(system="", messages=done, tools=[], cycle=4))
    assert final.message.text == "done"

    # without retry_interrupted the script goes on past an interrupted call
    plain = load_script({"turns": [t.model_dump(exclude_none=True) for t in script.turns]})
    assert script_position(history, retries=False) == 2
    on = anyio.run(ReplayClient(plain).complete,
                   ModelRequest(system="", messages=history, tools=[], cycle=2))
    assert on.message.text == "done"
