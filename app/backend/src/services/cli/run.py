"""``studio run``: the loop on an existing directory, live on stderr, one JSON line with --json."""

from __future__ import annotations

import contextlib
import json
import tempfile
import uuid
from pathlib import Path
from typing import Annotated

import anyio
import typer

from services.cli.live import LiveConsoleSink
from services.composition import PROVIDERS, EngineRequest, build_engine, command_sandbox
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.errors import ConfigError
from services.execution.guards import AgentLimits
from services.execution.mcp_bridge import McpHub
from services.execution.outcomes import RunResult
from services.execution.ports import EventSink, ModelClient, SelfDrivingEngine
from services.execution.sinks import FanOutSink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from services.settings import StudioSettings, get_settings, mcp_base_environment


def _usage_error(message: str) -> None:
    typer.echo(f"studio run: {message}", err=True)
    raise typer.Exit(2)


async def _drive(engine: ModelClient | SelfDrivingEngine, deps: AgentDeps,
                 prompt: str) -> RunResult:
    agent = FrontierAgent(engine, deps)
    try:
        return await agent.run(prompt)
    finally:
        if not isinstance(engine, SelfDrivingEngine):
            await engine.aclose()


def run_in_workspace(
    *, workspace: Path, provider: str, prompt: str, model: str | None, script: Path | None,
    limits: AgentLimits, settings: StudioSettings, sinks: list[EventSink],
    execution_id: str | None = None, branch: str | None = None,
    default_branch: str | None = None,
) -> RunResult:
    """Run the loop on ``workspace`` once, with the sinks given (live output, journal ...)."""
    execution_id = execution_id or str(uuid.uuid4())
    run_dir = Path(tempfile.mkdtemp(prefix=f"studio-run-{execution_id[:8]}-"))
    engine = build_engine(EngineRequest(provider=provider, model=model, workspace=workspace,
                                        run_dir=run_dir, script=script), settings)
    ctx = ToolDomainContext(
        workspace_root=workspace, execution_id=execution_id, request_id=str(uuid.uuid4()),
        correlation_id=execution_id, sandbox=command_sandbox(settings), branch=branch,
        default_branch=default_branch,
        git_author_name=settings.git_author_name, git_author_email=settings.git_author_email,
    )
    registry = default_registry()
    with contextlib.ExitStack() as stack:
        if settings.mcp_config is not None:
            hub = stack.enter_context(McpHub.from_file(settings.mcp_config,
                                                       base_env=mcp_base_environment()))
            hub.register(registry)
        deps = AgentDeps(dispatcher=Dispatcher(registry), ctx=ctx, sink=FanOutSink(sinks),
                         limits=limits)
        return anyio.run(_drive, engine, deps, prompt)


def run_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Annotated[Path, typer.Option("--workspace", help="An existing directory.")],
    provider: Annotated[str, typer.Option(help="codex | gemini | claude | replay")] = "replay",
    model: Annotated[str | None, typer.Option(help="Model name (provider default).")] = None,
    script: Annotated[Path | None, typer.Option(help="Replay script (JSON).")] = None,
    max_iterations: Annotated[int, typer.Option(min=1)] = 24,
    max_budget_usd: Annotated[float, typer.Option(min=0.0)] = 2.0,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON line last.")] = False,
) -> None:
    """Run the agent loop on an existing directory."""
    if provider not in PROVIDERS:
        _usage_error(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    if not workspace.is_dir():
        _usage_error(f"--workspace {workspace} is not a directory")
    if provider == "replay" and script is None:
        _usage_error("the replay provider needs --script FILE")
    limits = AgentLimits(max_iterations=max_iterations, max_budget_usd=max_budget_usd)
    try:
        result = run_in_workspace(workspace=workspace, provider=provider, prompt=prompt,
                                  model=model, script=script, limits=limits,
                                  settings=get_settings(), sinks=[LiveConsoleSink()])
    except ConfigError as exc:
        _usage_error(exc.message)
    if json_output:
        typer.echo(json.dumps(result.summary(), separators=(",", ":")))
    else:
        typer.echo(result.result.model_dump_json(indent=2))
    raise typer.Exit(0 if result.succeeded else 1)
