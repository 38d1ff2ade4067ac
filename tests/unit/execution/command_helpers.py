"""Helpers shared by the command-domain tests: a context and a one-call dispatcher."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from services.execution.envelope import envelope_to_json
from services.execution.messages import ToolCall
from services.execution.ports import CommandSandbox
from services.execution.sandbox.selection import DEFAULT_LIMITS, CommandLimits, select_sandbox
from services.execution.tool_domains.command import tools as command
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry

_counter = iter(range(1_000_000))


def require_sandbox(mode: str, limits: CommandLimits = DEFAULT_LIMITS) -> CommandSandbox:
    """The ``mode`` sandbox, or a skip off CI (a failure under ``CI=true``) where it cannot run."""
    import pytest

    from tests.conftest import IN_CI

    sandbox = select_sandbox(mode, limits)
    if sandbox.mode != mode:
        message = f"{mode} sandbox unavailable here: {getattr(sandbox, 'reason', '?')}"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return sandbox


def command_context(
    workspace: Path, sandbox: CommandSandbox | None, **overrides: Any
) -> ToolDomainContext:
    return ToolDomainContext(
        workspace_root=workspace, execution_id="exec-1", request_id="req-1",
        correlation_id="corr-1", sandbox=sandbox, **overrides,
    )


@contextmanager
def sandbox_context(workspace: Path, mode: str, limits: CommandLimits = DEFAULT_LIMITS,
                    notify: Callable[[str, str], None] | None = None,
                    **overrides: Any) -> Iterator[ToolDomainContext]:
    """A context on ``workspace`` under ``mode``: a sandbox mode, or ``MODE-session`` for the
    execution's long-lived sandbox of that mode (opened here, closed when the block ends)."""
    sandbox = require_sandbox(mode.removesuffix("-session"), limits)
    if not mode.endswith("-session"):
        yield command_context(workspace, sandbox, **overrides)
        return
    with sandbox.session(workspace, notify or (lambda code, message: None)) as session:
        yield command_context(workspace, session, **overrides)


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


def sleep_marker() -> str:
    """A unique number to sleep for: it finds the command's processes in ``/proc``."""
    return f"{uuid.uuid4().int % 9000 + 1000}.{uuid.uuid4().int % 10**8:08d}"


@contextmanager
def watching_pids(marker: str, seen_flag: Path | None = None) -> Iterator[set[int]]:
    """While the block runs, collect the host pids whose command line holds ``marker``.

    With ``seen_flag``, the watcher creates that file once it has seen more than one such
    process, so a command can hold its processes until they have been seen: on a loaded
    machine a scan of ``/proc`` may take longer than the command would otherwise live."""
    seen: set[int] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(marker_pids(marker))
            if seen_flag is not None and len(seen) > 1 and not seen_flag.exists():
                seen_flag.touch()
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        yield seen
    finally:
        done.set()
        watcher.join()


def gone(marker: str) -> bool:
    """Whether every process holding ``marker`` is gone (reaping may take a moment)."""
    for _ in range(200):
        if not marker_pids(marker):
            return True
        time.sleep(0.05)
    return not marker_pids(marker)
