"""Fixtures for the workspace and pull-request tests: a token-protected smart-HTTP git host with a
seeded repository, settings pointing at throw-away directories, and plain-git helpers for
verification (never for the code under test)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.repos.hosts import HostPolicy
from services.repos.origins import GitOrigins, IntegrationGitAuth, credential_origin
from services.settings import StudioSettings
from tests.support.git_http_server import GIT_ENV, GitHttpHost, git_http_server, seed_bare_repo

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


@pytest.fixture
def settings(tmp_path: Path) -> StudioSettings:
    return StudioSettings(workspace_dir=tmp_path / "workspaces", data_dir=tmp_path / "data",
                          git_author_name=AUTHOR[0], git_author_email=AUTHOR[1])


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    """``acme/widgets`` (``main`` plus ``develop``, ~400 KB of incompressible content) on a host
    that requires :data:`TOKEN`."""
    with git_http_server(tmp_path / "git-host", TOKEN) as host:
        files: dict[str, bytes | str] = {"README.md": "# widgets\n",
                                         "blob.bin": os.urandom(400_000)}
        bare = seed_bare_repo(host.root, REPO, files, extra_branches=("develop",))
        yield Remote(host=host, url=host.url(REPO), bare=bare)
