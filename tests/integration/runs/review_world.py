"""A pull request to review in a repository world (:mod:`tests.integration.repo_env`): a branch
pushed to the real bare repository with a planted bug, opened as a pull request on the GitHub
double, and the replay scripts of a reviewing model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.integration.repo_env import REPO, RepoWorld
from tests.support.git_http_server import GIT_ENV

BUGGY = "def mean(values):\n    return sum(values) / (len(values) - 1)\n"
FIXED = "def mean(values):\n    return sum(values) / len(values)\n"
BUG_LINE = 2


def push_branch(world: RepoWorld, branch: str, files: dict[str, str], *,
                start: str = "main") -> str:
    """Commit ``files`` on ``branch`` (from ``start``, or the branch itself when it exists) and
    push it to the bare repository; answers the new head sha."""
    work = world.root / f"push-{branch}-{len(list(world.root.glob('push-*')))}"
    env = {**GIT_ENV, "HOME": str(world.root), "GIT_AUTHOR_NAME": "Dev",
           "GIT_AUTHOR_EMAIL": "dev@example.invalid", "GIT_COMMITTER_NAME": "Dev",
           "GIT_COMMITTER_EMAIL": "dev@example.invalid"}

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=work, env=env, check=True,
                              capture_output=True, text=True).stdout.strip()

    bare = world.host.bare(REPO)
    subprocess.run(["git", "clone", "-q", str(bare), str(work)], env=env, check=True,
                   capture_output=True)
    exists = world.api.branch_sha("acme", "widgets", branch) is not None
    git("checkout", "-q", "-B", branch, f"origin/{branch if exists else start}")
    for name, content in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(content)
    git("add", "-A")
    git("commit", "-q", "-m", f"change {branch}")
    git("push", "-q", "origin", f"{branch}:{branch}")
    return git("rev-parse", "HEAD")


def review_json(*findings: dict[str, Any], verdict: str = "request_changes",
                summary: str = "Reviewed the change.") -> str:
    return json.dumps({"summary": summary, "verdict": verdict, "findings": list(findings)})


def finding(path: str = "stats.py", line: int = BUG_LINE,
            title: str = "mean() divides by n - 1") -> dict[str, Any]:
    return {"path": path, "line": line, "severity": "major", "title": title,
            "body": "The mean of [2, 4] is 3, this gives 6."}


def script(*turns: dict[str, Any]) -> dict[str, Any]:
    return {"turns": list(turns)}


def final(text: str) -> dict[str, Any]:
    return {"final": text}


def calls(*pairs: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"tool_calls": [{"tool": tool, "args": args} for tool, args in pairs]}


def write_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path
