"""``studio tools list`` and ``studio tools call``: the tool domains without a model."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from services.composition import command_sandbox
from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.messages import ToolCall
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, error_envelope
from services.execution.tool_domains.registry import default_registry
from services.settings import get_settings

app = typer.Typer(help="List and call the tool domains directly.", no_args_is_help=True)


@app.command("list")
def list_tools() -> None:
    """Print every operation as a JSON array (name, domain, operation, description, parameters)."""
    typer.echo(json.dumps([spec.describe() for spec in default_registry().specs()]))


def _usage_envelope(name: str, message: str) -> dict[str, Any]:
    domain, _, operation = name.partition(".")
    call = ToolCall(call_id="cli", tool_name=name.replace(".", "_", 1), domain=domain,
                    operation=operation)
    ctx_ids = str(uuid.uuid4())
    ctx = ToolDomainContext(workspace_root=Path("."), execution_id="cli", request_id=ctx_ids,
                            correlation_id=ctx_ids)
    failure = ToolFailure(ErrorCode.INVALID_ARGUMENTS, message, details={"usage": True})
    return envelope_to_json(error_envelope(call, ctx, failure))


def print_usage_error(rest: list[str], message: str) -> None:
    """Answer a usage error of ``tools call`` with an error envelope, alone on stdout."""
    name = next((a for a in rest if not a.startswith("-")), "")
    typer.echo(json.dumps(_usage_envelope(name, message)))


def _fail_usage(name: str, message: str) -> None:
    typer.echo(json.dumps(_usage_envelope(name, message)))
    raise typer.Exit(2)


def _parse_args(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        _fail_usage(name, f"--args is not valid JSON: {exc.msg}")
    if not isinstance(value, dict):
        _fail_usage(name, "--args must be a JSON object")
    return value  # type: ignore[no-any-return]


@app.command("call")
def call_tool(
    name: Annotated[str, typer.Argument(metavar="DOMAIN.OPERATION")],
    workspace: Annotated[Path, typer.Option("--workspace", help="Workspace root directory.")],
    args: Annotated[str, typer.Option("--args", help="Arguments as a JSON object.")] = "{}",
    branch: Annotated[str | None, typer.Option(help="The execution's own branch.")] = None,
    allow_workflows: Annotated[
        bool, typer.Option("--allow-workflows", help="Allow changes under .github/workflows/.")
    ] = False,
) -> None:
    """Call one operation and print exactly its envelope as JSON (exit 0 iff ok)."""
    registry = default_registry()
    if "." not in name or registry.get(name) is None:
        _fail_usage(name, f"unknown operation {name!r}; see `studio tools list`")
    if not workspace.is_dir():
        _fail_usage(name, f"--workspace {workspace} is not a directory")
    parsed = _parse_args(name, args)
    settings = get_settings()
    ids = str(uuid.uuid4())
    ctx = ToolDomainContext(
        workspace_root=workspace, execution_id=f"cli-{ids}", request_id=ids, correlation_id=ids,
        branch=branch, allow_workflow_changes=allow_workflows,
        sandbox=command_sandbox(settings),
        git_author_name=settings.git_author_name, git_author_email=settings.git_author_email,
    )
    dispatcher = Dispatcher(registry)
    envelope = dispatcher.dispatch(dispatcher.normalize("cli-1", name, parsed), ctx)
    typer.echo(json.dumps(envelope_to_json(envelope)))
    raise typer.Exit(0 if envelope.ok else 1)
