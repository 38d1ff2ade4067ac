"""The tool gateway a self-driving engine (claude) calls for each tool call of its own loop.

The Claude Agent SDK runs the model loop inside the Claude Code CLI, so FrontierAgent cannot stand
between model calls. It acts where it can: at every tool call (kill switch, cancellation,
the repository budget, loop detection, events, dispatch), and, when a guard trips, by answering
the call with an error and asking the engine to ``interrupt()`` the session. ``max_turns`` and
``max_budget_usd`` are handed to the CLI, which enforces them itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from services.execution.errors import ErrorCode
from services.execution.messages import Message, Role, TextPart
from services.execution.outcomes import Outcome, RunResult, StopRun
from services.execution.ports import SelfDrivingEngine, SessionOutcome

if TYPE_CHECKING:
    from services.execution.agent_runtime import FrontierAgent

STOP_REASON_OUTCOMES: dict[str, tuple[Outcome, ErrorCode | None]] = {
    "end_turn": (Outcome.FINISHED, None),
    "success": (Outcome.FINISHED, None),
    "error_max_turns": (Outcome.MAX_ITERATIONS_EXCEEDED, ErrorCode.MAX_ITERATIONS_EXCEEDED),
    "error_max_budget_usd": (Outcome.BUDGET_EXCEEDED, ErrorCode.BUDGET_EXCEEDED),
}


class LoopToolGateway:
    """Implements ``ToolGateway`` on top of a running FrontierAgent."""

    def __init__(self, agent: FrontierAgent, engine: SelfDrivingEngine) -> None:
        self.agent = agent
        self.engine = engine
        self.calls = 0
        self.stop: StopRun | None = None

    async def call_tool(self, call_id: str | None, name: str,
                        args: dict[str, Any]) -> dict[str, Any]:
        cycle = self.calls
        self.calls += 1
        if self.stop is not None:
            raise self.stop
        try:
            self.agent.check_control()
            self._check_budget()
        except StopRun as stop:
            await self._halt(stop)
            raise
        call = self.agent.deps.dispatcher.normalize(call_id or f"{cycle}-0", name, args)
        envelope, warning, loop_stop = await self.agent.dispatch(call, cycle)
        if loop_stop is not None:
            await self._halt(loop_stop)
            raise loop_stop
        if warning:
            return {**envelope, "warning": warning}
        return envelope

    def _check_budget(self) -> None:
        budget = self.agent.deps.budget
        code = budget.check() if budget is not None else None
        if code is not None:
            raise StopRun(code, "the repository's daily budget is spent")

    async def _halt(self, stop: StopRun) -> None:
        self.stop = stop
        await self.engine.interrupt()

    def conclude(self, session: SessionOutcome, messages: list[Message]) -> RunResult:
        """Map the session's end to an outcome (a guard's stop wins over the CLI's reason)."""
        agent = self.agent
        agent.iterations = session.turns
        agent.account(session.usage, agent.engine.model, self.calls)
        if session.final_text:
            reply = Message(role=Role.ASSISTANT, parts=[TextPart(text=session.final_text)])
            messages.append(reply)
        extra = {"transcript_path": session.transcript_path, "turns": session.turns}
        if self.stop is not None:
            stop = self.stop
            return agent.finish(stop.outcome, messages, self.calls, code=stop.code,
                                message=stop.message, extra=extra)
        outcome, code = STOP_REASON_OUTCOMES.get(session.stop_reason,
                                                 (Outcome.ERROR, ErrorCode.PROVIDER_UNAVAILABLE))
        if outcome is Outcome.FINISHED:
            return agent.finish(outcome, messages, self.calls, final_text=session.final_text,
                                extra=extra)
        return agent.finish(outcome, messages, self.calls, code=code,
                            message=f"session ended: {session.stop_reason}", extra=extra)
