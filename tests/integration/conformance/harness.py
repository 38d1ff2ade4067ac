"""Running one conformance row against one provider: engine, workspace, dispatcher, agent.

Every run gets its own scripted model server, its own git-initialised workspace and its own
dispatcher (the native domains plus the MCP hub's ``mcp__<server>__<tool>`` specs), the real
command sandbox (``select_sandbox("auto")``), a :class:`MemorySink` and a tiny retry delay.
Nothing is shared between runs but the MCP hub (two stateless demo servers) and the sandbox.

Providers: ``codex`` (Responses), ``codex-chat`` (Chat Completions), ``gemini`` and ``claude``
through their real SDKs (the Claude Code CLI bundled in the ``claude-agent-sdk`` wheel) against
:class:`ScriptedModelServer`; ``replay`` from the replay script built out of the same steps
(:func:`replay_script`).
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.errors import ErrorCode
from services.execution.guards import AgentLimits, RetryPolicy
from services.execution.mcp.bridge import McpHub
from services.execution.messages import Usage as NeutralUsage
from services.execution.outcomes import RunResult
from services.execution.ports import (
    AgentEvent,
    AgentEventKind,
    CommandSandbox,
    ModelClient,
    SelfDrivingEngine,
)
from services.execution.pricing import PriceTable
from services.execution.providers.capabilities import CAPABILITIES, ProviderCapabilities
from services.execution.providers.claude import ClaudeConfig, ClaudeEngine
from services.execution.providers.claude_env import claude_env_from
from services.execution.providers.claude_tools import allowed_tool_name
from services.execution.providers.codex import CodexClient
from services.execution.providers.gemini import GeminiClient
from services.execution.providers.replay import ReplayClient, load_script
from services.execution.sinks import MemorySink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from tests.support.model_script import Reply
from tests.support.model_script import ToolCall as ScriptCall
from tests.support.model_server import (
    Error,
    Hang,
    RequestRecord,
    ScriptedModelServer,
    Step,
    Text,
    ToolCalls,
)

API_KEY = "sk-conformance-SECRET-7b3e91d2"
PROVIDERS = ("codex", "codex-chat", "gemini", "claude", "replay")
MODELS = {
    "codex": "gpt-5.1",
    "codex-chat": "gpt-5.1",
    "gemini": "gemini-2.5-pro",
    "claude": "claude-sonnet-4-5",
    "replay": "gpt-5.1",  # priced like codex, so the budget row replays the same costs
}
VENDOR = {"codex": "openai", "codex-chat": "openai", "gemini": "gemini", "claude": "anthropic"}
RETRY = RetryPolicy(max_attempts=3, base_delay_s=0.01, max_delay_s=0.05)


class NotRepresentable(Exception):
    """A step the replay script form cannot express (an HTTP error: replay has no wire)."""


def capabilities(provider: str) -> ProviderCapabilities:
    """The published capability row of a table column (``codex-chat`` is codex's chat mode)."""
    return CAPABILITIES["codex" if provider == "codex-chat" else provider]


# --- the control the kill-switch row flips --------------------------------------------------


@dataclass
class KillSwitch:
    """A RunControl (the operator's kill switch) that the test engages."""

    engaged: bool = False
    checks: int = 0

    def check(self) -> ErrorCode | None:
        self.checks += 1
        return ErrorCode.KILLSWITCH_ENGAGED if self.engaged else None


class EngagingSink(MemorySink):
    """Keeps events; engages ``switch`` once ``after`` tool results were recorded."""

    def __init__(self, switch: KillSwitch | None, after: int | None) -> None:
        super().__init__()
        self.switch = switch
        self.after = after
        self.requests_when_engaged: int | None = None
        self.count_requests: Callable[[], int] = lambda: 0

    def emit(self, event: AgentEvent) -> None:
        super().emit(event)
        if (self.switch is not None and self.after is not None and not self.switch.engaged
                and len(self.of_kind(AgentEventKind.TOOL_RESULT)) >= self.after):
            self.switch.engaged = True
            self.requests_when_engaged = self.count_requests()


# --- translating the neutral steps --------------------------------------------------------


def _rename(reply: Any, rename: Callable[[str], str]) -> Any:
    if isinstance(reply, ToolCalls):
        calls = tuple(ScriptCall(rename(c.name), c.arguments) for c in reply.calls)
        return replace(reply, calls=calls)
    if isinstance(reply, Hang) and reply.then is not None:
        return replace(reply, then=_rename(reply.then, rename))
    return reply


def wire_steps(provider: str, steps: Sequence[Step]) -> list[Step]:
    """The steps as the provider's model names the tools (claude: ``mcp__studio__<tool>``)."""
    if provider != "claude":
        return list(steps)

    def translate(step: Step) -> Step:
        if callable(step):
            def renamed(record: RequestRecord) -> Reply:
                reply: Reply = _rename(step(record), allowed_tool_name)
                return reply
            return renamed
        translated: Step = _rename(step, allowed_tool_name)
        return translated

    return [translate(step) for step in steps]


def replay_script(steps: Sequence[Step], model: str, prices: PriceTable) -> dict[str, Any]:
    """The replay form of neutral steps; each turn's usage is priced like ``model``'s."""
    turns: list[dict[str, Any]] = []
    for step in steps:
        if callable(step) or isinstance(step, Error | Hang):
            raise NotRepresentable(f"replay has no wire: {step!r} cannot be replayed")
        usage = step.usage
        cost, _ = prices.cost(model, NeutralUsage(input_tokens=usage.input_tokens,
                                                  output_tokens=usage.output_tokens))
        priced = {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens,
                  "cost_usd": cost}
        if isinstance(step, Text):
            turns.append({"final": step.text, "usage": priced})
        else:
            calls = [{"tool": c.name, "args": dict(c.arguments)} for c in step.calls]
            turns.append({"tool_calls": calls, "usage": priced})
    return {"turns": turns}


# --- one run -------------------------------------------------------------------------------


@dataclass
class Run:
    """What a row's assertions look at."""

    provider: str
    result: RunResult
    sink: EngagingSink
    workspace: Path
    server: ScriptedModelServer | None
    caps: ProviderCapabilities
    switch: KillSwitch | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def turn_based(self) -> bool:
        return not self.caps.self_driving_loop

    @property
    def requests(self) -> list[RequestRecord]:
        """Model requests the server saw (empty for replay)."""
        if self.server is None:
            return []
        return [r for r in self.server.requests if r.vendor != "unknown"]

    def envelopes(self) -> list[dict[str, Any]]:
        """Every dispatched call's envelope, in order."""
        return [e.data["envelope"] for e in self.sink.of_kind(AgentEventKind.TOOL_RESULT)]

    def warnings(self, code: str) -> list[AgentEvent]:
        return [e for e in self.sink.of_kind(AgentEventKind.WARNING) if e.data["code"] == code]

    def model_turns(self) -> int:
        """Model turns answered (server requests for wire providers, replay turns otherwise)."""
        if self.server is None:
            return len(self.sink.of_kind(AgentEventKind.MODEL_RESPONSE))
        return len({r.turn for r in self.requests})


def git_workspace(root: Path) -> Path:
    """A git repository with one commit: a tiny Python project."""
    root.mkdir(parents=True)
    (root / "README.md").write_text("# conformance\n")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(root.parent)}
    for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"],
                 ["git", "-c", "user.name=t", "-c", "user.email=t@localhost", "commit", "-qm",
                  "init"]):
        subprocess.run(argv, cwd=root, check=True, env=env, capture_output=True)
    return root


def _engine(provider: str, server: ScriptedModelServer | None, steps: Sequence[Step],
            workspace: Path, scratch: Path, prices: PriceTable
            ) -> ModelClient | SelfDrivingEngine:
    model = MODELS[provider]
    if provider == "replay":
        return ReplayClient(load_script(replay_script(steps, model, prices)), model=model)
    assert server is not None
    if provider in ("codex", "codex-chat"):
        return CodexClient(model=model, api_key=API_KEY, base_url=server.url + "/v1",
                           mode="chat" if provider == "codex-chat" else "responses")
    if provider == "gemini":
        return GeminiClient(model=model, api_key=API_KEY, base_url=server.url)
    scratch.mkdir(parents=True, exist_ok=True)
    return ClaudeEngine(ClaudeConfig(
        model=model, workspace=workspace, api_key=API_KEY, base_url=server.url,
        env=claude_env_from(os.environ), transcript_dir=scratch / "transcripts",
        scratch_dir=scratch, max_retries=2,
    ))


@contextmanager
def _server(provider: str, steps: Sequence[Step]) -> Iterator[ScriptedModelServer | None]:
    if provider == "replay":
        yield None
        return
    with ScriptedModelServer(wire_steps(provider, steps)) as server:
        yield server


async def _drive(engine: ModelClient | SelfDrivingEngine, deps: AgentDeps,
                 task: str) -> RunResult:
    try:
        return await FrontierAgent(engine, deps).run(task)
    finally:
        if not isinstance(engine, SelfDrivingEngine):
            await engine.aclose()


def run_row(provider: str, steps: Sequence[Step], *, tmp: Path, hub: McpHub,
            sandbox: CommandSandbox, limits: AgentLimits,
            kill_after_tool_results: int | None = None,
            task: str = "Do the task, then answer with the JSON result.") -> Run:
    """Run the neutral ``steps`` as ``provider``'s model, through the whole stack."""
    workspace = git_workspace(tmp / "ws")
    registry = default_registry()
    hub.register(registry)
    switch = KillSwitch() if kill_after_tool_results is not None else None
    sink = EngagingSink(switch, kill_after_tool_results)
    execution_id = str(uuid.uuid4())
    ctx = ToolDomainContext(workspace_root=workspace, execution_id=execution_id,
                            request_id=f"req-{execution_id[:8]}", correlation_id=execution_id,
                            sandbox=sandbox)
    prices = PriceTable()
    with _server(provider, steps) as server:
        if server is not None:
            sink.count_requests = lambda: len(server.requests)
        engine = _engine(provider, server, steps, workspace, tmp / "scratch", prices)
        deps = AgentDeps(dispatcher=Dispatcher(registry), ctx=ctx, sink=sink, prices=prices,
                         limits=limits, control=switch, retry=RETRY)
        result = anyio.run(_drive, engine, deps, task)
    return Run(provider=provider, result=result, sink=sink, workspace=workspace, server=server,
               caps=capabilities(provider), switch=switch)


def envelope_json(text: Any) -> dict[str, Any]:
    """A tool result's content as the envelope it carries (each wire wraps it differently).

    Anthropic: ``[{"type": "text", "text": "<envelope JSON>"}]``, to which Claude Code appends
    ``<system-reminder>`` text of its own (e.g. the USD budget left), so only the leading JSON
    document is read.
    """
    if isinstance(text, dict):
        return text
    if isinstance(text, list):
        text = "".join(block.get("text", "") for block in text if isinstance(block, dict))
    data, _ = json.JSONDecoder().raw_decode(text)
    assert isinstance(data, dict)
    return data
