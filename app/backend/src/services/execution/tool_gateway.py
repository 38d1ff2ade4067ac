"""The tool gateway a self-driving engine (claude) calls for each tool call of its own loop.

The Claude Agent SDK runs the model loop inside the Claude Code CLI, so FrontierAgent cannot stand
between model calls. It acts where it can: at every tool call (kill switch, cancellation,
the repository budget, loop detection, events, dispatch), and, when a guard trips, by answering
the call with an error and asking the engine to ``interrupt()`` the session. ``max_turns`` and
``max_budget_usd`` are handed to the CLI, which enforces them itself.

The gateway knows the loop only through what it is given: the shared
:class:`~services.execution.tool_runner.ToolRunner` and a guard callable. When the session ends
it answers a :class:`SessionVerdict`; the loop turns that value into the run's result.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from services.execution.approvals import PauseRun
from services.execution.errors import ErrorCode
from services.execution.outcomes import Outcome, StopRun
from services.execution.ports import SelfDrivingEngine, SessionOutcome
from services.execution.tool_runner import ToolRunner

STOP_REASON_OUTCOMES: dict[str, tuple[Outcome, ErrorCode | None]] = {
    "end_turn": (Outcome.FINISHED, None),
    "success": (Outcome.FINISHED, None),
    "error_max_turns": (Outcome.MAX_ITERATIONS_EXCEEDED, ErrorCode.MAX_ITERATIONS_EXCEEDED),
    "error_max_budget_usd": (Outcome.BUDGET_EXCEEDED, ErrorCode.BUDGET_EXCEEDED),
}


@dataclass(frozen=True)
class SessionVerdict:
    """How a self-driving session ended, as the run's outcome (a guard's stop wins)."""

    outcome: Outcome
    code: ErrorCode | None = None
    message: str = ""
    final_text: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class LoopToolGateway:
    """Implements ``ToolGateway``: each call passes ``guard`` then goes through ``runner``."""

    def __init__(self, runner: ToolRunner, engine: SelfDrivingEngine,
                 guard: Callable[[], None]) -> None:
        self.runner = runner
        self.engine = engine
        self.guard = guard  # raises StopRun (kill switch, cancellation, repository budget)
        self.calls = 0
        self.stop: StopRun | None = None
        self.pause: PauseRun | None = None  # a call waits for an approval: the session ends

    async def call_tool(self, call_id: str | None, name: str,
                        args: dict[str, Any]) -> dict[str, Any]:
        cycle = self.calls
        self.calls += 1
        if self.stop is not None:
            raise self.stop
        if self.pause is not None:
            raise self.pause
        try:
            self.guard()
        except StopRun as stop:
            await self._halt(stop)
            raise
        call = self.runner.normalize(call_id or f"{cycle}-0", name, args)
        try:
            step = await self.runner.run(call, cycle)
        except PauseRun as pause:  # the approval gate: end the session, the run resumes later
            self.pause = pause
            await self.engine.interrupt()
            raise
        if step.stop is not None:
            await self._halt(step.stop)
            raise step.stop
        if step.warning:
            return {**step.envelope, "warning": step.warning}
        return step.envelope

    async def _halt(self, stop: StopRun) -> None:
        self.stop = stop
        await self.engine.interrupt()

    def conclude(self, session: SessionOutcome) -> SessionVerdict:
        """Map the session's end to a verdict (a guard's stop wins over the CLI's reason; a
        pause for an approval is raised, :class:`PauseRun`, as when the engine re-raises it)."""
        extra = {"transcript_path": session.transcript_path, "turns": session.turns}
        if self.stop is not None:
            return SessionVerdict(self.stop.outcome, self.stop.code, self.stop.message,
                                  extra=extra)
        if self.pause is not None:
            # the session ended because a call waits for an approval: the CLI's end can be
            # seen before the gateway's raise reaches the engine (it awaits the interrupt)
            raise self.pause
        outcome, code = STOP_REASON_OUTCOMES.get(session.stop_reason,
                                                 (Outcome.ERROR, ErrorCode.PROVIDER_UNAVAILABLE))
        if outcome is Outcome.FINISHED:
            return SessionVerdict(outcome, final_text=session.final_text, extra=extra)
        return SessionVerdict(outcome, code, f"session ended: {session.stop_reason}",
                              extra=extra)
