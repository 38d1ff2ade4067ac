"""`studio demo` as a user runs it (a real subprocess): the workspace comes from
``provision_workspace``, the output contract is one JSON line, and nothing is left behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]


def test_demo_pushes_the_agents_branch_and_cleans_up(tmp_path: Path) -> None:
    env = {**os.environ, "STUDIO_DATA_DIR": str(tmp_path / "data"),
           "STUDIO_WORKSPACE_DIR": str(tmp_path / "workspaces"),
           "STUDIO_GIT_AUTHOR_NAME": "Demo Agent", "STUDIO_GIT_AUTHOR_EMAIL": "demo@studio.invalid"}
    env.pop("STUDIO_DATABASE_URL", None)
    proc = warm_cli.run([*STUDIO, "demo"], capture_output=True, text=True, env=env,
                        timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    execution_id = summary["execution_id"]
    assert summary["status"] == "success"
    assert summary["branch"] == f"studio/{execution_id}-fix-add"
    remote = Path(summary["remote"])
    log = subprocess.run(["git", f"--git-dir={remote}", "log", "-1", "--format=%an|%s",
                          summary["branch"]], capture_output=True, text=True, check=True)
    assert log.stdout.strip() == "Demo Agent|Fix add(): return the sum"
    assert summary["commit"] == subprocess.run(
        ["git", f"--git-dir={remote}", "rev-parse", summary["branch"]], capture_output=True,
        text=True, check=True).stdout.strip()
    assert list((tmp_path / "workspaces").iterdir()) == []
