"""What the legacy runtime needs from a provider's agent CLI, and the items its stream becomes.

A :class:`CliAdapter` builds the CLI's argv and environment and turns each line the CLI prints
into normalized items: a model turn (:class:`ModelTurn`), a tool's output
(:class:`ToolOutput`), the session's end (:class:`SessionEnd`), or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from services.execution.legacy.keyproxy import ModelRoute
from services.execution.messages import Usage


@dataclass(frozen=True)
class CliToolCall:
    call_id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ModelTurn:
    """One model response as the CLI reported it (``message_id`` dedupes split messages)."""

    message_id: str
    model: str
    text: str
    tool_calls: list[CliToolCall]
    usage: Usage | None


@dataclass(frozen=True)
class ToolOutput:
    call_id: str
    output: str
    is_error: bool


@dataclass(frozen=True)
class SessionEnd:
    """The CLI's own account of how its session ended."""

    subtype: str  # "success", "error_max_turns", "error_max_budget_usd", "error_during_execution"
    final_text: str
    turns: int | None = None
    reported_cost_usd: float | None = None
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UsageReport:
    """Usage reported apart from a model turn (Codex: once per turn of the session)."""

    usage: Usage
    model: str = ""


Item = ModelTurn | ToolOutput | SessionEnd | UsageReport


@dataclass(frozen=True)
class CliRequest:
    """One run of a CLI: the task, the limits it enforces itself, where it keeps its state."""

    prompt: str
    model: str
    max_turns: int
    max_budget_usd: float
    home: Path  # the CLI's private home as the CLI sees it
    endpoint: str = ""  # the base URL of the harness's model proxy, as the CLI reaches it
    token: str = ""  # the per-execution token the CLI sends instead of the provider key


class CliAdapter(Protocol):
    """A provider's agent CLI (see :mod:`.claude_code`)."""

    name: str
    provider: str
    environ: dict[str, str]  # the deployment's environment (the key, its base URL, proxies)
    home_dirs: tuple[str, ...]  # created in the private home before the CLI starts
    hidden: tuple[str, ...]  # workspace entries masked with an empty directory (bubblewrap)

    def home_files(self, request: CliRequest) -> dict[str, str]:
        """Files written into the private home before the CLI starts (its own settings)."""
        ...

    def model_route(self) -> ModelRoute:
        """Where the CLI's model calls go and the credential they carry: held by the harness's
        model proxy (:mod:`.keyproxy`), never given to the CLI."""
        ...

    def readable(self) -> list[Path]:
        """Host directories the CLI's own files live in (bound read-only in the sandbox)."""
        ...

    def argv(self, request: CliRequest, *, sandboxed: bool) -> list[str]:
        """The command; ``sandboxed`` when the harness's sandbox confines it (the CLI's own
        sandbox, where it has one, may then be off)."""
        ...

    def env(self, request: CliRequest) -> dict[str, str]:
        """The whole environment of the CLI: the proxy's base URL and token
        (``request.endpoint``, ``request.token``), nothing secret."""
        ...

    def parse(self, line: str) -> list[Item]:
        """The items of one line of output; raises ``ValueError`` on a line it cannot read."""
        ...


#: Where a CLI's own tools land among our tool domains (``None``: no domain fits).
DOMAIN_OF: Mapping[str, tuple[str, str]] = {
    "Bash": ("command", "run"),
    "Read": ("workspace", "read_file"),
    "Edit": ("workspace", "edit_file"),
    "MultiEdit": ("workspace", "edit_file"),
    "Write": ("workspace", "write_file"),
    "Glob": ("workspace", "glob"),
    "Grep": ("workspace", "search"),
    "LS": ("workspace", "list_dir"),
    # Codex
    "command_execution": ("command", "run"),
    "file_change": ("workspace", "apply_patch"),
}


def domain_of(tool: str) -> tuple[str, str]:
    """``(domain, operation)`` of a CLI tool: the nearest domain, else ``legacy``/the name."""
    return DOMAIN_OF.get(tool, ("legacy", tool.lower()))
