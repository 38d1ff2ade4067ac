"""What a tool handler knows about the execution it works for."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.execution.confinement import real_root
from services.execution.ports import CommandSandbox, GitAuth, PullRequestPort

DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024
DEFAULT_GIT_NAME = "Studio Agent"
DEFAULT_GIT_EMAIL = "studio-agent@localhost"


@dataclass(frozen=True)
class ToolDomainContext:
    """The execution a tool call belongs to, and the capabilities injected for it."""

    workspace_root: Path
    execution_id: str
    request_id: str
    correlation_id: str
    branch: str | None = None
    default_branch: str | None = None
    allow_workflow_changes: bool = False
    sandbox: CommandSandbox | None = None
    git_auth: GitAuth | None = None
    pull_requests: PullRequestPort | None = None
    git_author_name: str = DEFAULT_GIT_NAME
    git_author_email: str = DEFAULT_GIT_EMAIL
    output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES
    max_command_timeout_s: float = 3600.0

    def resolved_workspace_root(self) -> Path:
        """The workspace root with every symlink resolved; every path must land under it."""
        return real_root(self.workspace_root)
