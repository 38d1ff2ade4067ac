"""Helpers shared by the command-domain tests: a context and a one-call dispatcher."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from services.execution.envelope import envelope_to_json
from services.execution.messages import ToolCall
from services.execution.ports import CommandSandbox
from services.execution.tool_domains import command
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry

_counter = iter(range(1_000_000))


def command_context(
    workspace: Path, sandbox: CommandSandbox | None, **overrides: Any
) -> ToolDomainContext:
    return ToolDomainContext(
        workspace_root=workspace, execution_id="exec-1", request_id="req-1",
        correlation_id="corr-1", sandbox=sandbox, **overrides,
    )


def run_command(ctx: ToolDomainContext, **args: Any) -> dict[str, Any]:
    """Dispatch one ``command.run`` call and return its envelope as JSON data."""
    dispatcher = Dispatcher(ToolRegistry(command.SPECS))
    call = ToolCall(call_id=f"call-{next(_counter)}", tool_name="command_run",
                    domain="command", operation="run", args=args)
    return envelope_to_json(dispatcher.dispatch(call, ctx))


def marker_pids(marker: str) -> set[int]:
    """Host pids whose command line contains ``marker`` (zombies have an empty one)."""
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if marker.encode() in handle.read():
                    found.add(int(entry))
        except OSError:
            continue
    return found
