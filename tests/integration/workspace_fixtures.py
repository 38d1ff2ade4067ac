"""Helpers of the workspace and checkpoint tests: the seeded repository's names, a git auth for a
loopback host, and plain-git helpers for verification (never for the code under test)."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from services.repos.hosts import HostPolicy
from services.repos.origins import GitOrigins, IntegrationGitAuth, credential_origin
from tests.support.git_http_server import GIT_ENV, GitHttpHost

TOKEN = "ghs_TestToken0123456789abcdefABCDEF"
REPO = "acme/widgets"
AUTHOR = ("Studio Test Agent", "agent@studio.invalid")


@dataclass
class Remote:
    host: GitHttpHost
    url: str
    bare: Path


def plain_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Plain git for setup and verification."""
    full = {**GIT_ENV, "HOME": str(cwd), **(env or {})}
    done = subprocess.run(["git", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def tree_contains(root: Path, needle: bytes) -> list[Path]:
    """Every file under ``root`` (``.git`` included, symlinks not followed) containing
    ``needle``."""
    found: list[Path] = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            if not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
    return found


def git_auth_for(base_url: str, token: str = TOKEN) -> IntegrationGitAuth:
    """The execution credentials of a deployment whose integration's git origin is
    ``base_url`` (a loopback host, allowed as from the CLI)."""
    origin = credential_origin(base_url)
    assert origin is not None
    return IntegrationGitAuth(GitOrigins(frozenset({origin}), "environment"),
                              HostPolicy(allow_loopback=True), token)
