"""What ``studio tools call`` does once its arguments are parsed: the registry, the dispatcher and
the sandbox, imported when the command runs (:mod:`services.cli.tools` only declares it)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, NoReturn

import typer

from services.composition import command_sandbox
from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.messages import ToolCall
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, error_envelope
from services.execution.tool_domains.registry import default_registry
from services.settings import get_settings


def usage_envelope(name: str, message: str) -> dict[str, Any]:
    """The error envelope answering a usage error of ``tools call`` on operation ``name``."""
    domain, _, operation = name.partition(".")
    call = ToolCall(call_id="cli", tool_name=name.replace(".", "_", 1), domain=domain,
                    operation=operation)
    ctx_ids = str(uuid.uuid4())
    ctx = ToolDomainContext(workspace_root=Path("."), execution_id="cli", request_id=ctx_ids,
                            correlation_id=ctx_ids)
    failure = ToolFailure(ErrorCode.INVALID_ARGUMENTS, message, details={"usage": True})
    return envelope_to_json(error_envelope(call, ctx, failure))


def _fail_usage(name: str, message: str) -> NoReturn:
    typer.echo(json.dumps(usage_envelope(name, message)))
    raise typer.Exit(2)


def _parse_args(name: str, raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        _fail_usage(name, f"--args is not valid JSON: {exc.msg}")
    if not isinstance(value, dict):
        _fail_usage(name, "--args must be a JSON object")
    return value


def call_operation(name: str, workspace: Path, args: str, branch: str | None,
                   allow_workflows: bool) -> None:
    """Call one operation, print exactly its envelope as JSON and exit (0 iff ok)."""
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
