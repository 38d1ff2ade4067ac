"""An operator sees what a workspace holds itself (issue 35): ``studio executions show`` (and the
API's execution record the run page shows) reports the workspace's own disk use, measured when
it is provisioned, and whether its history is borrowed from the mirror cache.

A real ``studio run --repo`` on the test git host, with a recorded script that finishes at once;
the control is the same run with ``STUDIO_REPO_MIRRORS=false`` (an executor pod), whose clone
holds its own history.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.repo_env import RepoWorld, last_json, repo_world, studio

# 300 KB of hex: the history (compressed, about half of it) is well over 10 % of the checkout
_RNG = random.Random(35)
BIG = "\n".join(_RNG.randbytes(32).hex() for _ in range(4600)) + "\n"
NOTHING_TO_DO = {"status": "success", "summary": "Nothing to change.", "changes": [],
                 "issues": [], "questions": []}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path, {"big.txt": BIG}) as found:
        yield found


def _shown(world: RepoWorld, tmp_path: Path, **extra: str) -> tuple[dict[str, Any], str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"final": NOTHING_TO_DO}]}))
    env = world.env(tmp_path / "ws", **extra)
    done = studio(env, "run", "--repo", world.url, "--no-pr", "--script", str(script), "--json",
                  "Say done")
    assert done.returncode == 0, done.stderr
    execution_id = last_json(done.stdout)["execution_id"]
    shown = studio(env, "executions", "show", execution_id, "--json")
    assert shown.returncode == 0, shown.stderr
    rich = studio(env, "executions", "show", execution_id)
    assert rich.returncode == 0, rich.stderr
    disk: dict[str, Any] = json.loads(shown.stdout)["workspace_disk"]
    return disk, " ".join(rich.stdout.split())


def test_a_borrowing_workspace_reports_its_checkout_and_little_else(world: RepoWorld,
                                                                    tmp_path: Path) -> None:
    disk, rich = _shown(world, tmp_path)
    assert disk["borrows_mirror"] is True
    assert disk["checkout_bytes"] > len(BIG)
    assert disk["own_bytes"] <= disk["checkout_bytes"] * 1.1, disk
    assert "history borrowed from the mirror" in rich


def test_control_a_clone_without_mirror_reports_its_own_history(world: RepoWorld,
                                                                 tmp_path: Path) -> None:
    disk, rich = _shown(world, tmp_path, STUDIO_REPO_MIRRORS="false")
    assert disk["borrows_mirror"] is False
    assert disk["checkout_bytes"] > len(BIG)
    assert disk["own_bytes"] > disk["checkout_bytes"] * 1.1, disk
    assert "history held in the workspace" in rich
