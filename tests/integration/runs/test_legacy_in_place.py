"""Cutover off, in place (``studio run --workspace``, no repository): the legacy runtime runs the
Claude Code CLI in that directory (a real ``studio`` process, SQLite and PostgreSQL); nothing is
finalized, the journal holds the CLI's calls, the row says ``legacy``."""

from __future__ import annotations

import json
from pathlib import Path

from services.db.executions import ExecutionRepository
from services.db.session import open_database
from tests.integration.runs.cli_runs import last_json, studio, studio_env
from tests.support.model_script import text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

DONE = {"status": "success", "summary": "wrote it", "changes": ["hello.txt"], "issues": [],
        "questions": []}


def test_cutover_off_in_place_runs_the_cli_in_the_directory(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    steps = [tool_calls([("Write", {"file_path": "hello.txt", "content": "hello\n"})]),
             text(json.dumps(DONE))]
    with ScriptedModelServer(steps) as server:
        env = studio_env(db_url, tmp_path)
        env.update(ANTHROPIC_BASE_URL=server.url, ANTHROPIC_API_KEY="sk-in-place-KEY",
                   STUDIO_SANDBOX="bwrap")
        assert studio(env, "settings", "set", "agent_runtime_cutover_enabled",
                      "false").returncode == 0
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", "claude",
                      "--model", "claude-sonnet-4-5", "--json", "Write hello.txt.")
    assert proc.returncode == 0, proc.stderr
    summary = last_json(proc.stdout)
    assert summary["status"] == "success"
    assert (workspace / "hello.txt").read_text() == "hello\n"
    db = open_database(studio_settings(tmp_path / "data", database_url=db_url))
    try:
        repo = ExecutionRepository(db, settings_redactor())
        row = repo.get(summary["execution_id"])
        events = repo.events(summary["execution_id"])
    finally:
        db.dispose()
    assert row is not None and row.runtime == "legacy" and row.status == "succeeded"
    assert [e.data["envelope"]["tool_name"] for e in events if e.kind == "tool_result"] == \
        ["Write"]
