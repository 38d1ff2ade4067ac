"""Claude: ClaudeEngine through FrontierAgent (the tool gateway) against a bare SDK loop.

Both drive the Claude Code CLI bundled with ``claude-agent-sdk`` for one session of N tool steps
against the scripted server's Anthropic SSE, with the same model, system prompt, tool declarations
(the MCP server ``studio``, Anthropic schema profile), ``max_turns``, ``max_budget_usd`` and CLI
environment (:func:`claude_env.session_env`: fresh config dir and home, non-essential traffic off).

*Harness*: :class:`ClaudeEngine` (its env launcher, its MCP bridge, transcript copy) through
FrontierAgent's tool gateway, the real dispatcher and the command domain.

*Bare*: ``ClaudeSDKClient`` with ``create_sdk_mcp_server`` tools; ``command_run`` spawns the
sandbox's ``true`` the way the floor does and answers an envelope-shaped JSON text. With
``tools="same"`` the other tools are declared too (never called) so the CLI sends the same
requests; ``tools="one"`` declares ``command_run`` alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    SdkMcpTool,
    create_sdk_mcp_server,
)

from bench.overhead_common import (
    API_KEY,
    CLAUDE_MODEL,
    TASK,
    TOOL,
    Clock,
    FloorCommand,
    RunTiming,
    envelope,
    neutral_tools,
    served,
    timing,
)
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.guards import AgentLimits
from services.execution.outcomes import Outcome
from services.execution.ports import AgentEventKind, CommandSandbox
from services.execution.prompts import system_prompt
from services.execution.providers import claude_env
from services.execution.providers.claude import ClaudeConfig, ClaudeEngine
from services.execution.providers.claude_tools import SERVER_NAME, allowed_tool_name
from services.execution.providers.schema_profiles import anthropic
from services.execution.sinks import MemorySink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry

SCRIPTED_TOOL = allowed_tool_name(TOOL)  # what the model calls: mcp__studio__command_run
BUDGET_USD = 2.0


def _base_env() -> dict[str, str]:
    return claude_env.claude_env_from(os.environ)


# ------------------------------------------------------------------ harness


async def _harness_async(sandbox: CommandSandbox, n: int, workspace: Path, scratch: Path,
                         url: str) -> tuple[float, float]:
    engine = ClaudeEngine(ClaudeConfig(
        model=CLAUDE_MODEL, workspace=workspace, api_key=API_KEY, base_url=url,
        env=_base_env(), transcript_dir=scratch / "transcripts", scratch_dir=scratch,
        max_retries=0,
    ))
    ctx = ToolDomainContext(workspace_root=workspace, execution_id=f"bench-{uuid.uuid4()}",
                            request_id="bench", correlation_id="bench", sandbox=sandbox)
    sink = MemorySink()
    deps = AgentDeps(dispatcher=Dispatcher(default_registry()), ctx=ctx, sink=sink,
                     limits=AgentLimits(max_iterations=n + 2, max_budget_usd=BUDGET_USD))
    agent = FrontierAgent(engine, deps)
    clock = Clock.start()
    result = await agent.run(TASK)
    elapsed = clock.elapsed()
    results = sink.of_kind(AgentEventKind.TOOL_RESULT)
    ok = [e for e in results if e.data["envelope"].get("ok")
          and e.data["envelope"]["result"].get("exit_code") == 0]
    if result.outcome is not Outcome.FINISHED or len(ok) != n:
        raise RuntimeError(f"claude harness: {result.outcome} ({result.error}), "
                           f"{len(ok)}/{len(results)} ok tool results")
    return elapsed


def harness(sandbox: CommandSandbox, n: int, workspace: Path) -> RunTiming:
    with tempfile.TemporaryDirectory(prefix="bench-claude-") as scratch, \
            served(n, SCRIPTED_TOOL) as server:
        elapsed = asyncio.run(_harness_async(sandbox, n, workspace, Path(scratch), server.url))
    return timing(n, elapsed, server)


# ------------------------------------------------------------------ bare SDK loop


def _bare_tools(command: FloorCommand, tools: str) -> tuple[list[SdkMcpTool[Any]], list[int]]:
    """The SDK tools and a one-item list counting ``command_run`` calls."""
    ran = [0]

    async def run_true(args: dict[str, Any]) -> dict[str, Any]:
        ran[0] += 1
        result = command.run(list(args["argv"]))
        text = json.dumps(envelope(f"call-{ran[0]}", result), separators=(",", ":"))
        return {"content": [{"type": "text", "text": text}]}

    async def unused(args: dict[str, Any]) -> dict[str, Any]:
        return {"content": [{"type": "text", "text": "not used by the benchmark"}],
                "is_error": True}

    schemas = neutral_tools()
    if tools == "one":
        schemas = [s for s in schemas if s.name == TOOL]
    out = [SdkMcpTool(name=s.name, description=s.description,
                      input_schema=anthropic(s.parameters),
                      handler=run_true if s.name == TOOL else unused)
           for s in schemas]
    return out, ran


async def _bare_async(sandbox: CommandSandbox, n: int, workspace: Path, scratch: Path,
                      tools: str, url: str) -> tuple[float, float]:
    command = FloorCommand(sandbox, workspace, scratch / "cmd")
    (scratch / "cmd").mkdir()
    sdk_tools, ran = _bare_tools(command, tools)
    system = system_prompt("repository work", neutral_tools(), "")
    for sub in ("config", "home"):
        (scratch / sub).mkdir()
    env = claude_env.session_env(
        _base_env(), config_dir=scratch / "config", home=scratch / "home",
        api_key=API_KEY, base_url=url, max_retries=0,
    )
    options = ClaudeAgentOptions(
        tools=[], allowed_tools=[allowed_tool_name(t.name) for t in sdk_tools],
        mcp_servers={SERVER_NAME: create_sdk_mcp_server(SERVER_NAME, tools=sdk_tools)},
        strict_mcp_config=True, setting_sources=[], system_prompt=system,
        model=CLAUDE_MODEL, max_turns=n + 2, max_budget_usd=BUDGET_USD,
        cwd=str(workspace), permission_mode="dontAsk", env=env,
    )
    result: ResultMessage | None = None
    clock = Clock.start()
    async with ClaudeSDKClient(options) as client:
        await client.query(TASK)
        async for message in client.receive_response():
            if isinstance(message, ResultMessage):
                result = message
    elapsed = clock.elapsed()
    if result is None or result.is_error or ran[0] != n:
        raise RuntimeError(f"bare claude loop: {result and result.subtype}, ran {ran[0]}/{n}")
    return elapsed


def bare(sandbox: CommandSandbox, n: int, workspace: Path, tools: str = "same") -> RunTiming:
    with tempfile.TemporaryDirectory(prefix="bench-claude-bare-") as scratch, \
            served(n, SCRIPTED_TOOL) as server:
        elapsed = asyncio.run(_bare_async(sandbox, n, workspace, Path(scratch), tools,
                                          server.url))
    return timing(n, elapsed, server)
