"""The claude tool gateway on its own: guards before each call, the shared runner, a verdict value.

The gateway knows the loop only through a ToolRunner and a guard callable; its end is a
``SessionVerdict`` (a guard's stop wins over the CLI's stop reason).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from services.execution.errors import ErrorCode
from services.execution.guards import LoopDetector
from services.execution.messages import Usage
from services.execution.outcomes import Outcome, StopRun
from services.execution.ports import AgentEvent, SessionOutcome
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from services.execution.tool_gateway import LoopToolGateway, SessionVerdict
from services.execution.tool_runner import ToolRunner


class Events:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def emit(self, event: AgentEvent) -> None:
        self.kinds.append(event.kind.value)


class Engine:
    """Only what the gateway asks of a self-driving engine: ``interrupt``."""

    provider, model = "claude", "claude-test"
    last_outcome: SessionOutcome | None = None

    def __init__(self) -> None:
        self.interrupted = 0

    async def run_session(self, **_: Any) -> SessionOutcome:
        raise AssertionError("the gateway never starts a session")

    async def interrupt(self) -> None:
        self.interrupted += 1


def gateway(root: Path, guard_code: ErrorCode | None = None) -> tuple[LoopToolGateway, Engine,
                                                                         Events]:
    events, engine = Events(), Engine()
    ctx = ToolDomainContext(workspace_root=root, execution_id="exec-gw", request_id="r",
                            correlation_id="c")
    runner = ToolRunner(Dispatcher(default_registry()), ctx, events, LoopDetector(), "claude",
                        True)

    def guard() -> None:
        if guard_code is not None:
            raise StopRun(guard_code, f"stopped: {guard_code.value}")

    return LoopToolGateway(runner, engine, guard), engine, events


def session(stop_reason: str, text: str = "done") -> SessionOutcome:
    return SessionOutcome(final_text=text, usage=Usage(), turns=2, stop_reason=stop_reason)


def test_a_call_goes_through_the_runner_with_its_events(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    gw, engine, events = gateway(tmp_path)
    envelope = anyio.run(gw.call_tool, "c1", "workspace_read_file", {"path": "a.txt"})
    assert envelope["ok"] is True and engine.interrupted == 0
    assert events.kinds == ["tool_call", "tool_result"]


def test_a_tripped_guard_interrupts_the_session_and_wins_the_verdict(tmp_path: Path) -> None:
    gw, engine, events = gateway(tmp_path, ErrorCode.KILLSWITCH_ENGAGED)
    with pytest.raises(StopRun):
        anyio.run(gw.call_tool, "c1", "workspace_read_file", {"path": "a.txt"})
    assert engine.interrupted == 1 and events.kinds == []  # nothing dispatched
    verdict = gw.conclude(session("end_turn"))
    assert verdict.outcome is Outcome.KILLSWITCH_ENGAGED
    assert verdict.code is ErrorCode.KILLSWITCH_ENGAGED and verdict.final_text == ""


@pytest.mark.parametrize(("reason", "expected"), [
    ("end_turn", SessionVerdict(Outcome.FINISHED, final_text="done")),
    ("error_max_turns", SessionVerdict(Outcome.MAX_ITERATIONS_EXCEEDED,
                                       ErrorCode.MAX_ITERATIONS_EXCEEDED,
                                       "session ended: error_max_turns")),
    ("something_new", SessionVerdict(Outcome.ERROR, ErrorCode.PROVIDER_UNAVAILABLE,
                                     "session ended: something_new")),
])
def test_the_stop_reason_becomes_the_verdict(tmp_path: Path, reason: str,
                                             expected: SessionVerdict) -> None:
    gw, _, _ = gateway(tmp_path)
    verdict = gw.conclude(session(reason))
    assert (verdict.outcome, verdict.code, verdict.message, verdict.final_text) == (
        expected.outcome, expected.code, expected.message, expected.final_text)
    assert verdict.extra == {"transcript_path": None, "turns": 2}


def test_a_session_ended_by_a_pause_for_approval_concludes_with_the_pause(
        tmp_path: Path) -> None:
    """The CLI's end (``interrupted``) can be seen before the gateway's raise reaches the
    engine: the verdict is then the pause itself, never an interrupted session's error."""
    from services.execution.approvals import PauseRun
    from services.execution.messages import ToolCall

    gw, _, _ = gateway(tmp_path)
    pause = PauseRun("appr-1", ToolCall(call_id="c1", tool_name="command_run",
                                        domain="command", operation="run", args={}))
    gw.pause = pause
    with pytest.raises(PauseRun) as raised:
        gw.conclude(session("interrupted"))
    assert raised.value is pause
