"""``studio demo`` from a fresh environment: an empty HOME, no configuration, no ``STUDIO_*``.

It must create its own database and sample repository, and the branch it names must exist in
the demo's remote with the fix in it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

STUDIO = [sys.executable, "-m", "services.cli"]


def test_demo_from_a_fresh_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "XDG_", "GIT_", "OPENAI_", "ANTHROPIC_", "GEMINI_"))}
    env.update(HOME=str(home), TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    proc = subprocess.run([*STUDIO, "demo"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=240, check=False)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    branch, remote = summary["branch"], Path(summary["remote"])
    assert branch and remote.is_relative_to(home), summary
    git_env = {"PATH": os.environ["PATH"], "HOME": str(home), "GIT_CONFIG_NOSYSTEM": "1"}
    fixed = subprocess.run(["git", f"--git-dir={remote}", "show", f"refs/heads/{branch}:calc.py"],
                           capture_output=True, text=True, env=git_env, check=True).stdout
    assert "return a + b" in fixed
    base = subprocess.run(["git", f"--git-dir={remote}", "show", "refs/heads/main:calc.py"],
                          capture_output=True, text=True, env=git_env, check=True).stdout
    assert "return a - b" in base
    assert (home / ".local" / "share" / "studio" / "studio.db").is_file()
