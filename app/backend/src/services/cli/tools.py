"""``studio tools list`` and ``studio tools call``: the tool domains without a model.

Only the commands' arguments are declared here; the registry and the dispatcher are imported when
a command runs (:mod:`services.cli.tool_calls`), so that ``studio --help`` does not load them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="List and call the tool domains directly.", no_args_is_help=True)


@app.command("list")
def list_tools() -> None:
    """Print every operation as a JSON array (name, domain, operation, description, parameters)."""
    from services.execution.tool_domains.registry import default_registry

    typer.echo(json.dumps([spec.describe() for spec in default_registry().specs()]))


def print_usage_error(rest: list[str], message: str) -> None:
    """Answer a usage error of ``tools call`` with an error envelope, alone on stdout."""
    from services.cli.tool_calls import usage_envelope

    name = next((a for a in rest if not a.startswith("-")), "")
    typer.echo(json.dumps(usage_envelope(name, message)))


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
    from services.cli.tool_calls import call_operation

    call_operation(name, workspace, args, branch, allow_workflows)
