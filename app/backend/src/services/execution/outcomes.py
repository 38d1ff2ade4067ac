"""How a run ends: outcomes are values, not exceptions."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel

from services.execution.errors import ErrorCode
from services.execution.messages import AgentResult, AgentStatus, Message


class Outcome(StrEnum):
    FINISHED = "finished"
    MAX_ITERATIONS_EXCEEDED = "max_iterations_exceeded"
    BUDGET_EXCEEDED = "budget_exceeded"
    LOOP_DETECTED = "loop_detected"
    KILLSWITCH_ENGAGED = "killswitch_engaged"
    CANCELLED = "cancelled"
    STALLED = "stalled"
    ERROR = "error"


OUTCOME_FOR_CODE: dict[ErrorCode, Outcome] = {
    ErrorCode.MAX_ITERATIONS_EXCEEDED: Outcome.MAX_ITERATIONS_EXCEEDED,
    ErrorCode.BUDGET_EXCEEDED: Outcome.BUDGET_EXCEEDED,
    ErrorCode.LOOP_DETECTED: Outcome.LOOP_DETECTED,
    ErrorCode.KILLSWITCH_ENGAGED: Outcome.KILLSWITCH_ENGAGED,
    ErrorCode.CANCELLED: Outcome.CANCELLED,
    ErrorCode.STALLED: Outcome.STALLED,
}


class StopRun(Exception):
    """Raised inside the loop (and by the tool gateway) when a guard stops the run."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    @property
    def outcome(self) -> Outcome:
        return OUTCOME_FOR_CODE.get(self.code, Outcome.ERROR)


class UsageTotals(BaseModel):
    input_tokens: int = 0  # including the cached ones and the cache writes
    output_tokens: int = 0
    cost_usd: float = 0.0
    cached_input_tokens: int = 0
    cache_write_input_tokens: int = 0


@dataclass
class RunResult:
    """What a run of FrontierAgent produced."""

    execution_id: str
    provider: str
    model: str
    outcome: Outcome
    result: AgentResult
    usage: UsageTotals
    iterations: int
    parsed_result: bool = False
    error: dict[str, Any] | None = None
    messages: list[Message] = field(default_factory=list)

    @property
    def status(self) -> str:
        """The AgentResult status when the run finished, else ``failed``."""
        if self.outcome is Outcome.FINISHED:
            return self.result.status.value
        return AgentStatus.FAILED.value

    @property
    def succeeded(self) -> bool:
        return self.outcome is Outcome.FINISHED and self.status in ("success", "partial")

    def summary(self) -> dict[str, Any]:
        """The compact JSON line of ``studio run --json``."""
        data: dict[str, Any] = {
            "execution_id": self.execution_id,
            "outcome": self.outcome.value,
            "status": self.status,
            "result": self.result.model_dump(mode="json"),
            "usage": self.usage.model_dump(mode="json"),
            "iterations": self.iterations,
        }
        if self.error:
            data["error"] = self.error
        return data
