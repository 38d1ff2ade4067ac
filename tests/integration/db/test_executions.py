"""ExecutionRepository and ``studio executions list|show``."""

from __future__ import annotations

import json

import pytest

from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.journal import DbEventSink
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.databases import url_of
from tests.integration.db.cli_helpers import studio


def test_lifecycle(db: Database) -> None:
    repo = ExecutionRepository(db, Redactor(["hunter2-password"]))
    snapshot = SettingsRepository(db).snapshot({})
    execution_id = repo.create(provider="codex", model="gpt-test", prompt="fix it",
                               repo_url="https://x:hunter2-password@example.test/o/r.git",
                               limits=snapshot["limits"], settings_snapshot=snapshot)
    assert len(execution_id) == 36
    repo.mark_running(execution_id, base_commit="abc123", branch="studio/x")
    repo.finish(execution_id, status="succeeded", outcome="finished",
                result={"status": "success", "summary": "done"}, usage={"input_tokens": 10},
                cost_usd=0.25, iterations=3)
    row = repo.get(execution_id)
    assert row is not None
    assert (row.status, row.outcome, row.iterations, row.cost_usd) == \
        ("succeeded", "finished", 3, 0.25)
    assert row.repo_url is not None and "hunter2" not in row.repo_url
    assert row.started_at is not None and row.finished_at is not None
    assert row.finished_at.tzinfo is not None
    assert [r.id for r in repo.list()] == [execution_id]
    with pytest.raises(ValueError):
        repo.finish(execution_id, status="done", outcome="x")
    with pytest.raises(UnknownExecution):
        repo.mark_running("00000000-0000-0000-0000-000000000000")


def test_cli_list_and_show(sqlite_db: Database) -> None:
    repo = ExecutionRepository(sqlite_db, Redactor())
    execution_id = repo.create(provider="replay", model="scripted", prompt="p",
                               settings_snapshot=SettingsRepository(sqlite_db).snapshot({}))
    call = {"call_id": "1-0", "tool_name": "git_status", "domain": "git", "operation": "status",
            "args": {}}
    envelope = {"ok": True, "call_id": "1-0", "tool_name": "git_status", "domain": "git",
                "operation": "status", "duration_ms": 4.0, "request_id": "r",
                "correlation_id": "c", "result": {"clean": True}}
    DbEventSink(sqlite_db, Redactor()).emit(AgentEvent(
        AgentEventKind.TOOL_RESULT, execution_id, 1,
        {"call": call, "envelope": envelope, "cycle": 1, "provider": "replay"}))
    repo.finish(execution_id, status="succeeded", outcome="finished", cost_usd=0.5,
                usage={"input_tokens": 1}, iterations=2)
    url = url_of(sqlite_db)
    listed = studio(url, "executions", "list", "--json")
    assert [e["id"] for e in json.loads(listed.stdout)] == [execution_id]
    table = studio(url, "executions", "list")
    assert execution_id in table.stdout  # full ids in the rich table
    shown = json.loads(studio(url, "executions", "show", execution_id, "--json").stdout)
    assert shown["settings_snapshot"]["agent_runtime_cutover_enabled"]["source"] == "default"
    assert [(c["call_id"], c["ok"], c["domain"]) for c in shown["tool_calls"]] == \
        [("1-0", True, "git")]
    assert (shown["cost_usd"], shown["usage"]) == (0.5, {"input_tokens": 1})
    rich = studio(url, "executions", "show", execution_id)
    assert "git.status" in rich.stdout and execution_id in rich.stdout
    assert studio(url, "executions", "show", "nope").returncode == 1
    assert studio(url, "executions", "cancel", execution_id).returncode == 0
    assert repo.get(execution_id) is not None
