"""Helpers for loop tests: a tiny tool registry and an agent builder (no SDK involved)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.errors import ErrorCode, ProviderRejected, ProviderUnavailable, ToolFailure
from services.execution.guards import AgentLimits, RetryPolicy
from services.execution.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    Usage,
)
from services.execution.ports import ModelClient
from services.execution.sinks import MemorySink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.spec import ToolArgs, ToolSpec


class EchoArgs(ToolArgs):
    text: str


class FailArgs(ToolArgs):
    pass


def _echo(args: EchoArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    return {"echo": args.text}


def _fail(args: FailArgs, ctx: ToolDomainContext) -> dict[str, Any]:
    raise ToolFailure(ErrorCode.PATH_NOT_FOUND, "nothing there")


TEST_SPECS = (
    ToolSpec("test", "echo", "Echo text back.", EchoArgs, _echo),
    ToolSpec("test", "fail", "Always fails.", FailArgs, _fail),
)


@dataclass
class FlagControl:
    """A RunControl whose answer the test flips."""

    code: ErrorCode | None = None
    checks: int = 0

    def check(self) -> ErrorCode | None:
        self.checks += 1
        return self.code


def tool_turn(*calls: tuple[str, dict[str, Any]], cost: float | None = None) -> ModelResponse:
    parts = [ToolCallPart(call=ToolCall(call_id=f"c{i}-{name}", tool_name=name,
                                        domain=name.split("_")[0],
                                        operation=name.split("_", 1)[1], args=args))
             for i, (name, args) in enumerate(calls)]
    return ModelResponse(message=Message(role=Role.ASSISTANT, parts=list(parts)),
                         usage=Usage(input_tokens=10, output_tokens=5, cost_usd=cost),
                         model="scripted")


def final_turn(text: str) -> ModelResponse:
    return ModelResponse(message=Message(role=Role.ASSISTANT, parts=[TextPart(text=text)]),
                         usage=Usage(input_tokens=10, output_tokens=5), model="scripted")


Step = ModelResponse | Exception | Callable[[ModelRequest], ModelResponse]


@dataclass
class ScriptedClient:
    """A ModelClient double driven by a list of steps (responses, or errors to raise)."""

    steps: Sequence[Step]
    provider: str = "scripted"
    model: str = "scripted"
    requests: list[ModelRequest] = field(default_factory=list)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request.model_copy(deep=True))
        index = len(self.requests) - 1
        step = self.steps[index] if index < len(self.steps) else final_turn('{"status": "success"}')
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return step(request)
        return step

    async def aclose(self) -> None:
        return None


def build_agent(workspace: Path, client: ModelClient, *, limits: AgentLimits | None = None,
                control: FlagControl | None = None,
                sleeps: list[float] | None = None) -> tuple[FrontierAgent, MemorySink]:
    sink = MemorySink()
    recorded = sleeps if sleeps is not None else []

    async def fake_sleep(seconds: float) -> None:
        recorded.append(seconds)

    deps = AgentDeps(
        dispatcher=Dispatcher(ToolRegistry(TEST_SPECS)),
        ctx=ToolDomainContext(workspace_root=workspace, execution_id="exec-1",
                              request_id="req-1", correlation_id="corr-1"),
        sink=sink, limits=limits or AgentLimits(), control=control,
        retry=RetryPolicy(max_attempts=3, base_delay_s=0.5), sleep=fake_sleep,
    )
    return FrontierAgent(client, deps), sink


__all__ = ["ProviderRejected", "ProviderUnavailable", "build_agent", "final_turn", "tool_turn"]
