"""The branch a remote's ``HEAD`` names: the default base of an execution's workspace.

Asked with ``git ls-remote --symref URL HEAD`` through the hardened ``run_git`` (one small
request: the ref advertisement of ``HEAD`` only). The mirror cache asks it at each update and
records it as the mirror's own ``HEAD``, so a workspace cloned from the mirror knows its
default branch (``origin/HEAD``) without a request of its own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.tool_domains.git.runner import run_git

_SYMREF = re.compile(r"^ref: refs/heads/(\S+)\s+HEAD$", re.MULTILINE)


def find_remote_head(cwd: Path, url: str, env: Mapping[str, str]) -> str | None:
    """The branch the remote's HEAD points to, or None (an empty repository, a detached HEAD)."""
    found = run_git(cwd, ["ls-remote", "--symref", "--upload-pack=git-upload-pack",
                          "--end-of-options", url, "HEAD"], env_extra=env)
    match = _SYMREF.search(found.text)
    return None if match is None else match.group(1)


def no_head_branch() -> ToolFailure:
    return ToolFailure(ErrorCode.GIT_ERROR, "the remote has no HEAD branch (empty repository?)",
                       details={"command": "git ls-remote"})


def remote_head_branch(cwd: Path, url: str, env: Mapping[str, str]) -> str:
    """The branch the remote's HEAD points to; ``git_error`` when there is none."""
    head = find_remote_head(cwd, url, env)
    if head is None:
        raise no_head_branch()
    return head
