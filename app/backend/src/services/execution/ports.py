"""The Protocols the engine sees; the composition root (CLI, worker, API) injects implementations.

Keeping them here lets the tool domains, the sandbox and the providers stay independent of one
another (checked by import-linter) and keeps SDKs for GitHub, databases and so on out of the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True)
class PreparedCommand:
    """A command ready to be started by the command domain, wrapped by a sandbox."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    preexec: Callable[[], None] | None = None


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
