"""``studio run --verbose`` prints each command's output tail as it ends; ``studio executions logs
ID`` prints the journal as the run page shows it, and ``--follow`` follows a live run to its end.

Real processes on a SQLite file of their own; the runs are replay runs (scripted model turns)
whose commands really run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]
FAILING = "echo first-out; echo the-error-line >&2; exit 3"


def _env(root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATABASE_URL=f"sqlite:///{root / 'studio.db'}",
               STUDIO_DATA_DIR=str(root / "data"), HOME=str(root))
    return env


def _script(root: Path, commands: list[str]) -> Path:
    turns: list[dict[str, Any]] = [
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sh", "-c", command], "timeout_s": 120}}]}
        for command in commands]
    turns.append({"final": "all done"})
    path = root / "script.json"
    path.write_text(json.dumps({"turns": turns}))
    return path


def _run(root: Path, commands: list[str], *extra: str) -> subprocess.CompletedProcess[str]:
    (root / "ws").mkdir(exist_ok=True)
    return warm_cli.run(
        [*STUDIO, "run", "fix it", "--workspace", str(root / "ws"), "--provider", "replay",
         "--script", str(_script(root, commands)), "--json", *extra],
        capture_output=True, text=True, env=_env(root), timeout=300, check=False)


def test_verbose_prints_a_failing_commands_output_tail(tmp_path: Path) -> None:
    done = _run(tmp_path, [FAILING], "--verbose")
    assert done.returncode == 0, done.stderr
    assert "exit 3 FAILED" in done.stderr
    assert "stdout | first-out" in done.stderr and "stderr | the-error-line" in done.stderr

    quiet = _run(tmp_path, [FAILING])
    assert "exit 3 FAILED" in quiet.stderr and "stderr | " not in quiet.stderr


def test_logs_prints_the_journal_with_outputs_and_the_end(tmp_path: Path) -> None:
    done = _run(tmp_path, [FAILING, "echo fixed"])
    execution_id = json.loads(done.stdout.strip().splitlines()[-1])["execution_id"]
    logs = warm_cli.run([*STUDIO, "executions", "logs", execution_id], capture_output=True,
                        text=True, env=_env(tmp_path), timeout=120, check=False)
    assert logs.returncode == 0, logs.stderr
    lines = logs.stdout.splitlines()
    assert any("-> command.run" in line and "exit 3" in line for line in lines)
    assert "    <- exit 3 FAILED" in lines and "      stderr | the-error-line" in lines
    assert "    <- exit 0 ok" in lines and "      stdout | fixed" in lines
    assert lines[-1].startswith("end: succeeded") and "cost=$" in lines[-1]

    missing = warm_cli.run([*STUDIO, "executions", "logs", "no-such-id"], capture_output=True,
                           text=True, env=_env(tmp_path), timeout=120, check=False)
    assert missing.returncode == 1 and "no execution no-such-id" in missing.stderr


def _latest_id(root: Path) -> str | None:
    listed = warm_cli.run([*STUDIO, "executions", "list", "--json"], capture_output=True,
                          text=True, env=_env(root), timeout=120, check=False)
    rows = json.loads(listed.stdout or "[]") if listed.returncode == 0 else []
    return str(rows[0]["id"]) if rows else None


def test_follow_prints_a_live_run_until_its_end(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    gate = "while [ ! -f release ]; do sleep 0.1; done; echo released-now"
    run = warm_cli.Popen(
        [*STUDIO, "run", "wait", "--workspace", str(tmp_path / "ws"), "--provider", "replay",
         "--script", str(_script(tmp_path, [gate]))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(tmp_path))
    try:
        deadline = time.monotonic() + 120
        execution_id = None
        while execution_id is None and time.monotonic() < deadline:
            time.sleep(0.3)
            execution_id = _latest_id(tmp_path)
        assert execution_id is not None
        follow = warm_cli.Popen([*STUDIO, "executions", "logs", execution_id, "--follow"],
                                stdout=subprocess.PIPE, text=True, env=_env(tmp_path))
        time.sleep(3)
        assert follow.poll() is None  # still following: the command waits for its release
        (tmp_path / "ws" / "release").write_text("go\n")
        out, _ = follow.communicate(timeout=120)
        assert follow.returncode == 0
        assert "      stdout | released-now" in out.splitlines()
        assert out.splitlines()[-1].startswith("end: succeeded")
    finally:
        run.wait(120)
