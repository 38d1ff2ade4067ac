"""``studio run``: the loop on an existing directory, live on stderr, one JSON line with --json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from services.cli.database import open_db
from services.cli.live import LiveConsoleSink
from services.composition import PROVIDERS
from services.execution.errors import ConfigError
from services.executions import ExecutionService, RunRequest
from services.settings import get_settings


def _usage_error(message: str) -> None:
    typer.echo(f"studio run: {message}", err=True)
    raise typer.Exit(2)


def run_command(
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    workspace: Annotated[Path, typer.Option("--workspace", help="An existing directory.")],
    provider: Annotated[str, typer.Option(help="codex | gemini | claude | replay")] = "replay",
    model: Annotated[str | None, typer.Option(help="Model name (provider default).")] = None,
    script: Annotated[Path | None, typer.Option(help="Replay script (JSON).")] = None,
    max_iterations: Annotated[int | None, typer.Option(min=1)] = None,
    max_budget_usd: Annotated[float | None, typer.Option(min=0.0)] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON line last.")] = False,
) -> None:
    """Run the agent loop on an existing directory; every run is recorded as an execution."""
    if provider not in PROVIDERS:
        _usage_error(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")
    if not workspace.is_dir():
        _usage_error(f"--workspace {workspace} is not a directory")
    if provider == "replay" and script is None:
        _usage_error("the replay provider needs --script FILE")
    settings = get_settings()
    service = ExecutionService(open_db(), settings)
    overrides = {"max_iterations": max_iterations, "max_budget_usd": max_budget_usd}
    request = RunRequest(provider=provider, prompt=prompt, workspace=workspace.resolve(),
                         model=model, script=script,
                         limit_overrides={k: v for k, v in overrides.items() if v is not None})
    try:
        result = service.run(request, sinks=[LiveConsoleSink()])
    except ConfigError as exc:
        _usage_error(exc.message)
    if json_output:
        typer.echo(json.dumps(result.summary(), separators=(",", ":")))
    else:
        typer.echo(result.result.model_dump_json(indent=2))
    raise typer.Exit(0 if result.succeeded else 1)
