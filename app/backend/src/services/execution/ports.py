"""The Protocols the engine sees; the composition root (CLI, worker, API) injects implementations.

Keeping them here lets the tool domains, the sandbox and the providers stay independent of one
another (checked by import-linter) and keeps SDKs for GitHub, databases and so on out of the engine.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from services.execution.errors import ErrorCode
from services.execution.messages import ModelRequest, ModelResponse, ToolSchema, Usage


class LaunchedCommand(Protocol):
    """A command a long-lived sandbox started on request (see :attr:`PreparedCommand.launch`).

    The runner owns :attr:`stdout` and :attr:`stderr` (read ends of pipes; it closes them) and
    waits for :attr:`exit_fd` to become readable, then asks :meth:`exit_status`; everything else
    the command started is already gone by then.
    """

    stdout: int
    stderr: int
    exit_fd: int

    def exit_status(self) -> int | None:
        """The exit status (negative: the signal), or None if the sandbox itself ended."""
        ...

    def kill(self) -> None:
        """End the command and every process it started (the deadline)."""
        ...

    def abandon(self) -> None:
        """The sandbox did not report the end after :meth:`kill`: end the whole sandbox."""
        ...

    def release(self) -> None:
        """The runner is done with this command: the sandbox may run the next one."""
        ...


@dataclass(frozen=True)
class PreparedCommand:
    """A command ready to be started by the command domain, wrapped by a sandbox."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    preexec: Callable[[], None] | None = None
    # Descriptors the child inherits (a seccomp program for bwrap); the runner closes them in the
    # parent once the child started, or when it could not start.
    pass_fds: tuple[int, ...] = ()
    # The child's stdin (None: empty); a gate the child waits on before its program starts.
    stdin: int | None = None
    # Called by the runner with the child's pid right after it started (places it in its cgroup).
    on_start: Callable[[int], None] | None = None
    # Called by the runner once the command ended (kills what is left of it, frees its cgroup).
    finish: Callable[[], None] | None = None
    # Set by a long-lived sandbox: the runner calls it instead of starting ``argv`` itself.
    launch: Callable[[], LaunchedCommand] | None = None

    def close_fds(self) -> None:
        """Close :attr:`pass_fds` in the parent (idempotent enough: EBADF is ignored)."""
        for fd in self.pass_fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class CommandSandbox(Protocol):
    """Wraps one command so that it runs confined; chosen once per process."""

    @property
    def mode(self) -> str:
        """``bwrap``, ``landlock`` or ``none`` (reported in every command result)."""
        ...

    def prepare(
        self, argv: Sequence[str], *, workspace: Path, cwd: Path, env: Mapping[str, str]
    ) -> PreparedCommand:
        """Wrap ``argv``; raise ``ToolFailure(sandbox_unavailable)`` when it cannot be confined."""
        ...

    def session(
        self, workspace: Path, notify: Callable[[str, str], None]
    ) -> contextlib.AbstractContextManager[CommandSandbox]:
        """The sandbox for one execution in ``workspace``, closed when the execution ends.

        A sandbox that can live as long as the execution (bubblewrap) starts it on the first
        command and runs every later command in it; the others answer with themselves.
        ``notify(code, message)`` reports what the execution's journal should record (a
        sandbox that died and was started again).
        """
        ...


class GitAuth(Protocol):
    """Credentials for the harness's own git network operations (push, fetch)."""

    def environment(self, remote_url: str) -> Mapping[str, str]:
        """``GIT_CONFIG_*`` variables carrying the token for ``remote_url``'s host only."""
        ...


@dataclass(frozen=True)
class PullRequestRef:
    number: int
    url: str
    head_branch: str
    base_branch: str
    created: bool


class PullRequestPort(Protocol):
    """Opens or reuses the pull request of an execution (keyed, so a retry never opens two)."""

    def create_or_reuse(
        self,
        *,
        execution_id: str,
        workspace: Path,
        head_branch: str,
        base_branch: str | None,
        title: str,
        body: str,
        draft: bool,
    ) -> PullRequestRef: ...


class IdempotencyStore(Protocol):
    """Recorded envelopes keyed by ``(execution_id, call_id)``."""

    def get(self, execution_id: str, call_id: str) -> dict[str, Any] | None: ...

    def put(self, execution_id: str, call_id: str, envelope: dict[str, Any]) -> None: ...


class AgentEventKind(StrEnum):
    STARTED = "started"
    MODEL_REQUEST = "model_request"
    MODEL_RESPONSE = "model_response"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    USAGE = "usage"
    WARNING = "warning"
    FINISHED = "finished"
    # after the loop: commit, push and pull request, each with its result (the durable path)
    FINALIZE = "finalize"
    # the next of ``models`` took over from one that stayed unavailable (execution.fallback)
    MODEL_FALLBACK = "model_fallback"
    # approval gates: a call waits for a person; a decision on a gated call (evidence)
    APPROVAL_REQUESTED = "approval_requested"
    APPROVAL_DECIDED = "approval_decided"
    # before the loop: each setup command and its output (services.runs.setup_phase)
    SETUP = "setup"
    # what the egress proxy refused and carried in a phase with controlled network
    NETWORK = "network"
    # the conversation was condensed to fit the model's window (services.execution.compaction)
    COMPACTION = "compaction"
    # the attempt failed with an infrastructure error: queued again or dead-lettered; or an
    # operator re-drove it (services.runs.retries)
    RETRY = "retry"


@dataclass(frozen=True)
class AgentEvent:
    """One step of an execution, as the event sink (journal, live output) receives it."""

    kind: AgentEventKind
    execution_id: str
    cycle: int
    data: dict[str, Any]


class EventSink(Protocol):
    def emit(self, event: AgentEvent) -> None: ...


class ModelClient(Protocol):
    """A turn-based provider adapter (codex, gemini, replay): one request in, one response out.

    Implementations turn SDK errors into ``ProviderUnavailable`` (retryable: 429, 5xx, 424,
    connection errors; ``details["retry_after"]`` in seconds when the server said so) or
    ``ProviderRejected``; the SDK's own retries are off, the loop retries.
    """

    provider: str
    model: str

    async def complete(self, request: ModelRequest) -> ModelResponse: ...

    async def aclose(self) -> None: ...


class ToolGateway(Protocol):
    """What a self-driving engine (claude) calls for each tool call its own loop makes.

    The gateway applies the guards, emits the events and dispatches; it answers with the envelope
    JSON, or raises ``GuardStop`` when the run must stop.
    """

    async def call_tool(
        self, call_id: str | None, name: str, args: dict[str, Any]
    ) -> dict[str, Any]: ...


@dataclass
class SessionOutcome:
    """What a self-driving engine reports when its session ends."""

    final_text: str
    usage: Usage
    turns: int
    stop_reason: str  # "end_turn", "error_max_turns", "error_max_budget_usd", "interrupted", ...
    transcript_path: str | None = None
    compactions: tuple[dict[str, Any], ...] = ()  # the engine's own compactions (Claude Code)


@runtime_checkable
class SelfDrivingEngine(Protocol):
    """A provider whose SDK runs the tool loop itself (the Claude Agent SDK)."""

    provider: str
    model: str
    # How the last session ended, kept when a guard's stop is re-raised after the session
    # closed (what it used still counts); ``None`` before the first session ends.
    last_outcome: SessionOutcome | None

    async def run_session(
        self, *, system: str, prompt: str, tools: list[ToolSchema], gateway: ToolGateway,
        max_turns: int, max_budget_usd: float,
    ) -> SessionOutcome: ...

    async def interrupt(self) -> None: ...


class RunControl(Protocol):
    """Checked before every model call and every tool call (kill switch, cancellation).

    Answers ``None`` to go on, or the code of the stop: ``killswitch_engaged`` or ``cancelled``.
    """

    def check(self) -> ErrorCode | None: ...


class BudgetPort(Protocol):
    """Spending caps beyond the execution's own (a repository's daily budget, a fleet cap).

    ``check`` runs before every model call; ``charge`` records what a call cost. Implementations
    must be atomic across processes (the database backs them).
    """

    def check(self) -> ErrorCode | None: ...

    def charge(self, usd: float) -> None: ...


_LAYER_TEXT = {"repository": "the repository's daily budget is spent",
               "team": "the team's monthly budget is spent"}


def budget_refusal(budget: BudgetPort | None) -> str:
    """The stop message of a refusal by ``budget``, naming the layer that refused (an
    implementation says which in ``refused_layer``; else ``repository``)."""
    layer = str(getattr(budget, "refused_layer", None) or "repository")
    return f"{_LAYER_TEXT.get(layer, f'the {layer} budget is spent')} (layer: {layer})"
