"""Running the real ``studio eval`` CLI: its environment and the eval rows it leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
OPENAI_KEY = "sk-test-EVALSECRET-0123456789abcdef"


DONE = json.dumps({"status": "success", "summary": "done", "changes": [], "issues": [],
                   "questions": []})


def write_value_task(root: Path, name: str, *, slow: bool = False) -> None:
    """A task (``tasks/<name>``) whose replay trajectory sets ``VALUE`` to 1 (after a 4 s
    command when ``slow``) and whose hidden test checks it."""
    folder = root / "tasks" / name
    (folder / "repo").mkdir(parents=True)
    (folder / "hidden").mkdir()
    (folder / "repo" / "value.py").write_text("VALUE = 0\n")
    (folder / "hidden" / "test_value.py").write_text(
        "import unittest\n\nimport value\n\n\nclass T(unittest.TestCase):\n"
        "    def test_value(self):\n        self.assertEqual(value.VALUE, 1)\n")
    turns: list[dict[str, Any]] = []
    if slow:  # long enough to be killed in
        turns.append({"tool_calls": [{"tool": "command.run", "args": {"argv": ["sleep", "4"]}}]})
    turns += [{"tool_calls": [{"tool": "workspace.write_file",
                               "args": {"path": "value.py", "content": "VALUE = 1\n"}}]},
              {"final": DONE}]
    (folder / "replay.json").write_text(json.dumps({"turns": turns}))
    (folder / "task.json").write_text(json.dumps({
        "prompt": f"Set VALUE to 1 ({name}).", "fail_to_pass": ["test_value.T.test_value"]}))



def eval_env(db_url: str, home: Path, model_url: str | None = None) -> dict[str, str]:
    """A ``studio`` process on ``db_url`` with nothing inherited that configures studio or a
    provider (no broker: each execution is a ``studio execute`` child of the eval process)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    home.mkdir(parents=True, exist_ok=True)
    env.update(STUDIO_DATABASE_URL=db_url, HOME=str(home), STUDIO_DATA_DIR=str(home / "data"),
               STUDIO_WORKSPACE_DIR=str(home / "workspaces"), OPENAI_API_KEY=OPENAI_KEY)
    if model_url is not None:
        env["OPENAI_BASE_URL"] = model_url + "/v1"
    return env


def studio(env: dict[str, str], *args: str,
           timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return warm_cli.run([*STUDIO, *args], env=env, capture_output=True, text=True,
                        timeout=timeout, check=False)


def report(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON report ``studio eval run --json`` prints (stdout holds nothing else)."""
    assert done.returncode == 0, done.stderr[-3000:]
    data: dict[str, Any] = json.loads(done.stdout)
    return data


def items_by_task(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {item["task_id"]: item for item in data["items"]}
