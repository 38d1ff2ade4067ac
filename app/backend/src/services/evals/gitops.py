"""The few git commands the evals run themselves (fixtures, diffs, fresh checkouts), with a
clean environment: no user or system configuration, a fixed author, no terminal prompt."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

GIT_TIMEOUT_S = 600
_IDENTITY = {"GIT_AUTHOR_NAME": "studio-eval", "GIT_AUTHOR_EMAIL": "eval@studio.invalid",
             "GIT_COMMITTER_NAME": "studio-eval", "GIT_COMMITTER_EMAIL": "eval@studio.invalid",
             "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
             "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


_USERINFO = re.compile(r"://[^/@\s]+@")


class GitFailed(Exception):
    """A git command that exited non-zero (its stderr, shortened, without URL credentials)."""


def without_credentials(text: str) -> str:
    """``text`` with the user-info part of every URL (``user:token@``) replaced."""
    return _USERINFO.sub("://***@", text)


def git_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": "file:http:https:ssh:git",
            **_IDENTITY}


def git(*args: str, cwd: Path, home: Path, stdin: bytes | None = None) -> bytes:
    """Run ``git args`` in ``cwd``; its stdout, or :class:`GitFailed`."""
    done = subprocess.run(["git", *args], cwd=cwd, env=git_env(home), input=stdin,
                          capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    if done.returncode != 0:
        error = done.stderr.decode("utf-8", "replace").strip()[-500:]
        raise GitFailed(without_credentials(f"git {args[0]} failed: {error}"))
    return done.stdout
