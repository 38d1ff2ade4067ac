"""Issue 12, as a user runs it: ``studio run`` keeps one sandbox for the execution.

The real CLI, a SQLite journal, the replay provider and bubblewrap: every command of the run
goes to one long-lived sandbox; when that sandbox is killed from outside in the middle of a
command, the command ends, the next one runs in a new sandbox, the journal records a
``sandbox_restarted`` warning, and no ``bwrap`` is left once the run is over.
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from services.db.session import open_database
from services.execution.sandbox.session import wait_gone
from services.executors.local import descendants
from tests.integration.runs.cli_runs import STUDIO, last_json, studio_env
from tests.support import warm_cli
from tests.support.settings import sqlite_settings
from tests.unit.execution.command_helpers import require_sandbox, sleep_marker

pytestmark = pytest.mark.sandbox


def _script(marker: str) -> dict[str, Any]:
    def run(command: str) -> dict[str, Any]:
        return {"tool_calls": [{"tool": "command.run", "args": {"command": command}}]}

    return {"turns": [
        run("echo one; cat /proc/1/comm"),
        run("echo two; cat /proc/1/comm"),
        run(f"sleep {marker}"),
        run("echo three; cat /proc/1/comm"),
        {"final": json.dumps({"status": "success", "summary": "done"})},
    ]}


def _bwraps(root: int) -> set[int]:
    found: set[int] = set()
    for pid in descendants(root):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "bwrap":
                found.add(pid)
        except OSError:
            continue
    return found


def _marker_running(root: int, marker: str) -> bool:
    for pid in descendants(root):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def test_one_sandbox_per_run_restarted_and_journaled(tmp_path: Path) -> None:
    require_sandbox("bwrap")
    db = tmp_path / "studio.db"
    open_database(sqlite_settings(db)).dispose()
    env = studio_env(f"sqlite:///{db}", tmp_path / "home")
    env["STUDIO_SANDBOX"] = "bwrap"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = sleep_marker()
    script = tmp_path / "script.json"
    script.write_text(json.dumps(_script(marker)))

    proc = warm_cli.Popen(
        [*STUDIO, "run", "--workspace", str(workspace), "--provider", "replay",
         "--script", str(script), "--json", "go"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: set[int] = set()
    deadline = time.monotonic() + 60
    while not _marker_running(proc.pid, marker):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        seen |= _bwraps(proc.pid)
        time.sleep(0.02)
    first = _bwraps(proc.pid)
    assert len(first) == 1, first  # the sleep runs in the one sandbox of the run
    subprocess.run(["kill", "-KILL", *map(str, first)], check=True)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert last_json(out)["outcome"] == "finished"
    for pid in seen | first:
        assert wait_gone(pid), f"bwrap {pid} outlived the run"

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT kind, data FROM execution_events ORDER BY seq").fetchall()
    events = [(kind, json.loads(data)) for kind, data in rows]
    warnings = [data["code"] for kind, data in events if kind == "warning"]
    assert warnings == ["sandbox_restarted"], events
    results = [data["envelope"]["result"] for kind, data in events if kind == "tool_result"]
    # PID 1 is the supervisor, on the base interpreter (``python3.11`` or ``python``)
    assert [re.sub(r"python[0-9.]*", "python", r["stdout"]) for r in results] == [
        "one\npython\n", "two\npython\n", "", "three\npython\n"], results
    assert (results[2]["exit_code"], results[2]["signal"]) == (None, "SIGKILL"), results[2]
    assert "the sandbox ended" in results[2]["stderr"]
