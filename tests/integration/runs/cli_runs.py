"""Running the real ``studio`` CLI against a database, a workspace and the scripted model server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
OPENAI_KEY = "sk-test-SECRETKEY-0123456789abcdef"
GITHUB_TOKEN = "ghs_SECRETGITHUBTOKEN0123456789abcdef"


def studio_env(db_url: str, home: Path, model_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATABASE_URL=db_url, HOME=str(home), STUDIO_DATA_DIR=str(home / "data"),
               STUDIO_GITHUB_TOKEN=GITHUB_TOKEN, OPENAI_API_KEY=OPENAI_KEY)
    if model_url is not None:
        env["OPENAI_BASE_URL"] = model_url + "/v1"
    return env


def studio(env: dict[str, str], *args: str, timeout: float = 120,
           fresh: bool = False) -> subprocess.CompletedProcess[str]:
    """``studio ARGS`` forked by the warm CLI launcher; with ``fresh``, exec'ed (a test that
    reads the process's ``/proc/<pid>/environ``, the block it was exec'ed with)."""
    run = subprocess.run if fresh else warm_cli.run
    return run([*STUDIO, *args], env=env, capture_output=True, text=True, timeout=timeout,
               check=False)


def last_json(stdout: str) -> dict[str, Any]:
    line = stdout.strip().splitlines()[-1]
    data: dict[str, Any] = json.loads(line)
    return data
