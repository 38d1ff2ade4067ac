"""Runs of the real CLI are recorded: journal, evidence, kill switch, SIGKILL and secrets.

Each test runs on SQLite and on PostgreSQL, with the codex provider going through the real
``openai`` SDK to the scripted model server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from services.db.executions import ExecutionRepository
from services.db.idempotency import DbIdempotencyStore
from services.db.session import Database, create_db_engine
from services.execution.messages import ToolCall
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from tests.integration.runs.cli_runs import (
    GITHUB_TOKEN,
    OPENAI_KEY,
    STUDIO,
    last_json,
    studio,
    studio_env,
)
from tests.support import warm_cli
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

DONE = json.dumps({"status": "success", "summary": "done"})


def _database(url: str) -> Database:
    return Database(create_db_engine(url))


def _events(db: Database, execution_id: str) -> list[tuple[int, str, dict[str, object]]]:
    rows = ExecutionRepository(db).events(execution_id)
    return [(row.seq, row.kind, row.data) for row in rows]


def test_every_run_is_recorded_with_its_journal(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = [tool_calls([("workspace_write_file", {"path": "a.txt", "content": "x"})]),
              tool_calls([("command_run", {"argv": ["cat", "a.txt"]})]), text(DONE)]
    with ScriptedModelServer(script) as server:
        env = studio_env(db_url, tmp_path, server.url)
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                      "--model", "gpt-5.1", "--json", "write a file")
    assert proc.returncode == 0, proc.stderr
    summary = last_json(proc.stdout)
    db = _database(db_url)
    row = ExecutionRepository(db).get(summary["execution_id"])
    assert row is not None and row.status == "succeeded" and row.outcome == "finished"
    events = _events(db, summary["execution_id"])
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    assert events[0][1] == "started" and events[-1][1] == "finished"
    calls = ExecutionRepository(db).tool_calls(summary["execution_id"])
    assert [c.tool_name for c in calls] == ["workspace_write_file", "command_run"]
    assert all(c.ok for c in calls)
    shown = studio(env, "executions", "show", summary["execution_id"], "--json")
    assert shown.returncode == 0 and summary["execution_id"] in shown.stdout
    db.dispose()


def test_killswitch_stops_a_running_execution_before_its_next_model_call(
        db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env_holder: dict[str, dict[str, str]] = {}

    def engage_then_call_a_tool(record: RequestRecord) -> Reply:
        switched = studio(env_holder["env"], "killswitch", "on")
        assert switched.returncode == 0, switched.stderr
        return tool_calls([("workspace_write_file", {"path": "late.txt", "content": "x"})])

    script = [tool_calls([("workspace_list_dir", {})]), engage_then_call_a_tool, text(DONE)]
    with ScriptedModelServer(script) as server:
        env_holder["env"] = env = studio_env(db_url, tmp_path, server.url)
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                      "--model", "gpt-5.1", "--json", "go")
        assert proc.returncode == 1, proc.stderr
        assert len(server.requests) == 2  # no model call after the switch
        summary = last_json(proc.stdout)
        assert summary["outcome"] == "killswitch_engaged" and summary["status"] == "failed"
        assert not (workspace / "late.txt").exists()  # its tool call never ran either
        refused = studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                         "--model", "gpt-5.1", "--json", "again")
        assert len(server.requests) == 2  # the new run made no model call
    assert refused.returncode == 1
    assert last_json(refused.stdout)["outcome"] == "killswitch_engaged"
    studio(env, "killswitch", "off")


def _wait_for(predicate, timeout: float = 180.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_sigkill_mid_loop_keeps_completed_cycles_and_recorded_calls_are_not_rerun(
        db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps({"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "one.txt", "content": "first"}}]},
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "two.txt", "content": "second"}}]},
        {"tool_calls": [{"tool": "command.run", "args": {"argv": ["sleep", "60"]}}]},
        {"final": {"status": "success", "summary": "never reached"}},
    ]}))
    env = studio_env(db_url, tmp_path)
    proc = warm_cli.Popen([*STUDIO, "run", "--workspace", str(workspace), "--provider",
                           "replay", "--script", str(script_file), "--json", "go"],
                          env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          start_new_session=True)
    db = _database(db_url)
    try:
        def sleeping() -> bool:
            rows = ExecutionRepository(db).list(limit=1)
            return bool(rows) and any(
                kind == "tool_call" and "sleep" in json.dumps(data)
                for _, kind, data in _events(db, rows[0].id))
        _wait_for(sleeping)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
    execution_id = ExecutionRepository(db).list(limit=1)[0].id
    events = _events(db, execution_id)
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))  # gap-free
    assert "finished" not in [kind for _, kind, _ in events]
    results = [data for _, kind, data in events if kind == "tool_result"]
    assert len(results) == 2  # both completed cycles are there, whole
    calls = {c.call_id: c for c in ExecutionRepository(db).tool_calls(execution_id)}
    assert calls["0-0"].ok and calls["1-0"].ok and calls["0-0"].envelope is not None
    # the same call dispatched again answers the recorded envelope; the side effect is not repeated
    (workspace / "one.txt").write_text("changed since")
    replay = ToolCall(call_id="0-0", tool_name="workspace_write_file", domain="workspace",
                      operation="write_file", args={"path": "one.txt", "content": "first"})
    ctx = ToolDomainContext(workspace_root=workspace, execution_id=execution_id,
                            request_id="r", correlation_id="c")
    store = DbIdempotencyStore(db, settings_redactor())
    envelope = Dispatcher(default_registry(), store).dispatch(replay, ctx)
    assert envelope.ok and envelope.model_dump(mode="json") == calls["0-0"].envelope
    assert (workspace / "one.txt").read_text() == "changed since"
    db.dispose()


def test_secrets_are_found_nowhere(db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    leak = f"token={GITHUB_TOKEN} key={OPENAI_KEY}"
    script = [tool_calls([("workspace_write_file", {"path": "leak.txt", "content": leak})]),
              tool_calls([("command_run", {"command": f"echo {GITHUB_TOKEN}; env"})]),
              text(json.dumps({"status": "success", "summary": f"done {OPENAI_KEY}"}))]
    with ScriptedModelServer(script) as server:
        env = studio_env(db_url, tmp_path, server.url)
        env["STUDIO_LOG_LEVEL"] = "INFO"  # the structured logs are searched too
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", "codex",
                      "--model", "gpt-5.1", "--json", f"use {GITHUB_TOKEN}")
    assert proc.returncode == 0, proc.stderr
    execution_id = last_json(proc.stdout)["execution_id"]
    logged = [json.loads(line) for line in proc.stderr.splitlines() if line.startswith("{")]
    tool_lines = [line for line in logged if line["logger"] == "studio.tool_calls"]
    assert [line["tool_name"] for line in tool_lines] == ["workspace_write_file", "command_run"]
    assert {"provider", "operation", "call_id", "request_id", "correlation_id", "cycle",
            "execution_id"} <= set(tool_lines[0])
    assert tool_lines[0]["provider"] == "codex" and tool_lines[1]["cycle"] == 1
    shown = studio(env, "executions", "show", execution_id, "--json")
    haystacks = {"stderr": proc.stderr, "shown": shown.stdout,
                 "journal": json.dumps(_events(_database(db_url), execution_id))}
    if db_url.startswith("sqlite"):
        base = Path(db_url.removeprefix("sqlite:///"))
        haystacks["db"] = "".join(p.read_bytes().decode("latin-1")
                                  for p in base.parent.glob(base.name + "*"))
    else:
        dump = subprocess.run(["pg_dump", "--data-only", db_url.replace("+psycopg", "")],
                              capture_output=True, text=True, timeout=60, check=True)
        haystacks["db"] = dump.stdout
    for where, text_ in haystacks.items():
        assert GITHUB_TOKEN not in text_, where
        assert OPENAI_KEY not in text_, where
    assert "[redacted]" in haystacks["journal"]


def test_cutover_off_answers_unsupported_capability_and_records_why(
        db_url: str, tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script_file = tmp_path / "script.json"
    script_file.write_text(json.dumps({"turns": [{"final": "never asked"}]}))
    env = studio_env(db_url, tmp_path)
    assert studio(env, "settings", "set", "agent_runtime_cutover_enabled", "false").returncode == 0
    proc = studio(env, "run", "--workspace", str(workspace), "--provider", "replay",
                  "--script", str(script_file), "--json", "go")
    assert proc.returncode == 1
    summary = last_json(proc.stdout)
    assert summary["outcome"] == "error"
    assert summary["error"]["code"] == "unsupported_capability"
    db = _database(db_url)
    row = ExecutionRepository(db).get(summary["execution_id"])
    assert row is not None and row.status == "failed"
    assert row.settings_snapshot["agent_runtime_cutover_enabled"] == {
        "value": False, "source": "runtime_setting"}
    assert row.runtime == "legacy"  # replay has no agent CLI: refused, not run
    assert _events(db, summary["execution_id"]) == []  # the loop never started
    db.dispose()
