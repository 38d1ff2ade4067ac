"""A repository world for durable-execution tests: a token-guarded git host, the GitHub REST API
over the same bare repositories, a SQLite database and the ``STUDIO_*`` environment around them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.db.session import Database, open_database
from services.settings import StudioSettings
from tests.support import warm_cli
from tests.support.git_http_server import GIT_ENV, GitHttpHost, git_http_server, seed_bare_repo
from tests.support.github_api import GitHubApi, github_api
from tests.support.settings import studio_settings

TOKEN = "ghs_RepoWorkflowSECRET0123456789abcdef"
REPO = "acme/widgets"
STUDIO = [sys.executable, "-m", "services.cli"]
FAILING_PROJECT = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "import unittest\n\nfrom calc import add\n\n\n"
                    "class AddTest(unittest.TestCase):\n"
                    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n",
    "README.md": "widgets\n",
}
TEST_ARGV = ["python3", "-m", "unittest", "-q"]
DONE = {"status": "success", "summary": "Fixed add(): it subtracted.",
        "changes": ["calc.py: add returns a + b"], "issues": [], "questions": []}


@dataclass
class RepoWorld:
    root: Path
    host: GitHttpHost
    api: GitHubApi
    db_url: str

    @property
    def url(self) -> str:
        return self.host.url(REPO)

    def env(self, workspaces: Path, **extra: str) -> dict[str, str]:
        """The environment of a ``studio`` process in this world (nothing inherited that
        configures studio or a provider)."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
        env.update(HOME=str(self.root / "home"), STUDIO_DATABASE_URL=self.db_url,
                   STUDIO_DATA_DIR=str(self.root / "data"), STUDIO_WORKSPACE_DIR=str(workspaces),
                   STUDIO_GITHUB_TOKEN=TOKEN, STUDIO_GITHUB_API_URL=self.api.api_url,
                   # the git host is not the API's host: its origin is named explicitly
                   STUDIO_GITHUB_GIT_ORIGINS=self.host.base_url,
                   STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1", **extra)
        return env

    def settings(self) -> StudioSettings:
        return studio_settings(self.root / "data", database_url=self.db_url, github_token=TOKEN,
                               github_api_url=self.api.api_url,
                               github_git_origins=[self.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"])

    def database(self) -> Database:
        return open_database(self.settings())

    def remote_file(self, branch: str, path: str) -> str | None:
        found = subprocess.run(
            ["git", f"--git-dir={self.host.bare(REPO)}", "show", f"refs/heads/{branch}:{path}"],
            env={**GIT_ENV, "HOME": str(self.root)}, capture_output=True, text=True, check=False)
        return found.stdout if found.returncode == 0 else None

    def pulls_of(self, branch: str) -> list[Any]:
        return [p for p in self.api.pulls if p.head == branch]


@contextmanager
def repo_world(root: Path, extra_files: dict[str, str] | None = None) -> Iterator[RepoWorld]:
    """The host and the API running, ``acme/widgets`` seeded with a failing test (and
    ``extra_files``)."""
    git_root = root / "git"
    (root / "home").mkdir(parents=True)
    seed_bare_repo(git_root, REPO, {**FAILING_PROJECT, **(extra_files or {})})
    with git_http_server(git_root, TOKEN) as host, github_api(git_root, TOKEN) as api:
        yield RepoWorld(root, host, api, f"sqlite:///{root / 'studio.db'}")


def studio(env: dict[str, str], *args: str,
           timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return warm_cli.run([*STUDIO, *args], env=env, capture_output=True, text=True,
                        timeout=timeout, check=False)


def last_json(stdout: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(stdout.strip().splitlines()[-1])
    return data
