"""Helpers for the git domain tests: real repositories (a bare ``origin`` and its clone).

Setup runs plain git with a deterministic environment (no user or system config); the code under
test runs through the dispatcher, exactly as a model's tool call would.
"""

from __future__ import annotations

import base64
import os
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from services.execution.envelope import envelope_to_json
from services.execution.messages import ToolCall
from services.execution.ports import PullRequestRef
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.git import tools as git_domain

AGENT_BRANCH = "agent/exec-1"


def plain_env(tmp: Path) -> dict[str, str]:
    """A plain git environment for test setup (hooks and repository config DO apply here)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_AUTHOR_NAME": "Setup",
        "GIT_AUTHOR_EMAIL": "setup@example.invalid",
        "GIT_COMMITTER_NAME": "Setup",
        "GIT_COMMITTER_EMAIL": "setup@example.invalid",
        "GIT_TERMINAL_PROMPT": "0",
    }


def sh(cwd: Path, *args: str, check: bool = True) -> str:
    """Plain git (for setup and verification, never for the code under test)."""
    done = subprocess.run(["git", *args], cwd=cwd, env=plain_env(cwd), capture_output=True,
                          text=True, check=False)
    if check and done.returncode != 0:
        raise AssertionError(f"git {args} failed: {done.stderr}")
    return done.stdout


def executable(path: Path, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@dataclass
class Repo:
    """A workspace cloned from a local bare ``origin`` whose ``main`` has one commit."""

    bare: Path
    ws: Path
    outside: Path

    def remote_log(self, ref: str) -> list[str]:
        out = sh(self.bare, f"--git-dir={self.bare}", "log", "--format=%H%x09%an%x09%ae%x09%s",
                 ref, "--")
        return out.splitlines()

    def remote_has(self, ref: str) -> bool:
        found = subprocess.run(["git", f"--git-dir={self.bare}", "rev-parse", "--verify",
                                "--quiet", ref], env=plain_env(self.bare), capture_output=True,
                               check=False)
        return found.returncode == 0

    def outside_names(self) -> set[str]:
        return {p.name for p in self.outside.iterdir()}


def make_repo(workspace: Path) -> Repo:
    """``origin`` (bare, default branch main) next to the workspace, and the workspace a clone."""
    tmp = workspace.parent
    bare = tmp / "origin.git"
    sh(tmp, "init", "--quiet", "--bare", "-b", "main", str(bare))
    seed = tmp / "seed"
    sh(tmp, "clone", "--quiet", str(bare), str(seed))
    (seed / "README.md").write_text("# demo\nline two\n")
    sh(seed, "add", "README.md")
    sh(seed, "commit", "--quiet", "-m", "initial commit")
    sh(seed, "push", "--quiet", "origin", "HEAD:refs/heads/main")
    sh(tmp, "clone", "--quiet", str(bare), str(workspace))
    sh(workspace, "config", "user.name", "Repository Config User")
    sh(workspace, "config", "user.email", "repo-config@example.invalid")
    return Repo(bare=bare, ws=workspace, outside=tmp / "outside")


def context(ws: Path, **overrides: Any) -> ToolDomainContext:
    values: dict[str, Any] = {
        "workspace_root": ws, "execution_id": "exec-1", "request_id": "req-1",
        "correlation_id": "corr-1", "branch": AGENT_BRANCH,
        "git_author_name": "Studio Agent", "git_author_email": "agent@studio.invalid",
    }
    values.update(overrides)
    return ToolDomainContext(**values)


_DISPATCHER = Dispatcher(ToolRegistry(git_domain.SPECS))
_counter = iter(range(1_000_000))


def call(ctx: ToolDomainContext, operation: str, **args: Any) -> dict[str, Any]:
    """Dispatch ``git.<operation>`` like a model would; the envelope as JSON."""
    tool_call = ToolCall(call_id=f"c{next(_counter)}", tool_name=f"git_{operation}",
                         domain="git", operation=operation, args=args)
    return envelope_to_json(_DISPATCHER.dispatch(tool_call, ctx))


def ok(envelope: dict[str, Any]) -> dict[str, Any]:
    assert envelope["ok"], envelope
    result: dict[str, Any] = envelope["result"]
    return result


def error_code(envelope: dict[str, Any]) -> str:
    assert not envelope["ok"], envelope
    code: str = envelope["error"]["code"]
    return code


TOKEN = "ghp_SuperSecretToken0123456789abcdefXYZ"


@dataclass
class TokenAuth:
    """Stands for the production GitAuth: the token as an extraHeader for the remote's URL."""

    urls: list[str] = field(default_factory=list)

    def environment(self, remote_url: str) -> dict[str, str]:
        self.urls.append(remote_url)
        basic = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
        return {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": f"http.{remote_url}.extraHeader",
                "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}"}


@dataclass
class RecordingPullRequests:
    """Stands for the pull-request port (PyGithub in production); records its calls."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def create_or_reuse(self, **kwargs: Any) -> PullRequestRef:
        self.calls.append(kwargs)
        return PullRequestRef(number=7, url="https://example.invalid/pr/7",
                              head_branch=kwargs["head_branch"],
                              base_branch=kwargs["base_branch"] or "main", created=True)
