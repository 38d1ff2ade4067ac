"""What a tool handler knows about the execution it works for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from services.execution.confinement_root import RootHandle, validate_root
from services.execution.ports import CommandSandbox, GitAuth, PullRequestPort

DEFAULT_OUTPUT_CAP_BYTES = 64 * 1024
DEFAULT_MAX_COPY_BYTES = 512 * 1024 * 1024
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
    # The most bytes one copy_path may write (apparent sizes: a sparse file counts in full).
    max_copy_bytes: int = DEFAULT_MAX_COPY_BYTES
    # Called with the bytes a workspace operation is about to write, before it writes them; it
    # raises (e.g. the workspace's disk cap) to refuse. Wired by the composition root.
    disk_check: Callable[[int], None] | None = None
    # Asked while a command runs (every STOP_POLL_S seconds): True once the execution is to stop
    # (its flowchart run was cancelled); the command's process group is then killed.
    stop_requested: Callable[[], bool] | None = None
    # The open root, made on first use and kept for the life of the context (the execution);
    # not an argument, so dataclasses.replace() never carries it to a context for another root.
    _root: list[RootHandle] = field(default_factory=list, init=False, compare=False, repr=False)

    def root_handle(self) -> RootHandle:
        """The execution's root, held open; every workspace path is opened beneath it.

        The first call resolves and opens the root (``/`` is refused); later calls check that
        the path still names that same directory.
        """
        if not self._root:
            validate_root(self.workspace_root)
            self._root.append(RootHandle(self.workspace_root))
        return self._root[0]

    def resolved_workspace_root(self) -> Path:
        """The workspace root with every symlink resolved; every path must land under it."""
        return self.root_handle().check()
