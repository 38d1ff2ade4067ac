"""Issue 19: ``STUDIO_SANDBOX=none`` is loud, and refused in production; the embedded database is
private to its user.

Before, ``none`` printed nothing (a command then read the harness's environment through
``/proc/$PPID/environ``), and ``studio.db`` was created 0644 in a 0755 directory.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from services.db.session import open_database
from services.execution.sandbox.selection import select_sandbox
from services.settings import StudioSettings
from tests.support import warm_cli
from tests.unit.execution.command_helpers import command_context, run_command

STUDIO = [sys.executable, "-m", "services.cli"]


def _studio(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")} | env
    return warm_cli.run([*STUDIO, *args], capture_output=True, text=True, timeout=120,
                        env=full, check=False)


def test_providers_warns_when_commands_are_unconfined() -> None:
    loud = _studio({"STUDIO_SANDBOX": "none"}, "providers", "--json")
    assert loud.returncode == 0, loud.stderr
    assert "WARNING" in loud.stderr and "UNCONFINED" in loud.stderr
    assert json.loads(loud.stdout)["sandbox"]["warning"]
    quiet = _studio({"STUDIO_SANDBOX": "bwrap"}, "providers", "--json")
    assert "UNCONFINED" not in quiet.stderr
    assert json.loads(quiet.stdout)["sandbox"] == {"configured": "bwrap", "mode": "bwrap",
                                                   "warning": None}


def test_every_unconfined_command_carries_a_warning(
    workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = command_context(workspace, select_sandbox("none"))
    with caplog.at_level("WARNING"):
        envelope = run_command(ctx, command="true")
    assert envelope["ok"] is True
    assert "WITHOUT a sandbox" in envelope["result"]["warning"]
    assert any("UNCONFINED" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mode", ["none", "auto"])
def test_production_never_runs_a_command_unconfined(workspace: Path, mode: str) -> None:
    sandbox = select_sandbox("none", production=True)
    assert sandbox.mode == "unavailable"
    envelope = run_command(command_context(workspace, sandbox), command="cat /proc/$PPID/environ")
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "sandbox_unavailable"
    proc = _studio({"STUDIO_SANDBOX": mode, "STUDIO_ENV": "production"}, "tools", "call",
                   "command.run", "--workspace", str(workspace), "--args",
                   '{"command": "echo ran"}')
    if mode == "none":
        assert json.loads(proc.stdout)["error"]["code"] == "sandbox_unavailable"
    else:  # auto finds bubblewrap here: production runs it
        assert json.loads(proc.stdout)["result"]["sandbox"] == "bwrap"


def test_the_embedded_database_is_private(tmp_path: Path) -> None:
    data = tmp_path / "fresh" / "data"
    db = open_database(StudioSettings(data_dir=data, database_url=None))
    try:
        with db.engine.begin() as connection:
            connection.exec_driver_sql("CREATE TABLE IF NOT EXISTS probe (x int)")
            connection.exec_driver_sql("INSERT INTO probe VALUES (1)")
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        files = [p for p in data.iterdir() if p.name.startswith("studio.db")]
        assert {p.name for p in files} >= {"studio.db", "studio.db-wal"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    finally:
        db.dispose()
