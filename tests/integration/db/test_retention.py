"""``studio db prune``: finished executions past the retention go, with everything they hold;
running ones and recent ones stay; bad values are refused and delete nothing."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, update

from services.db.base import utcnow
from services.db.journal import DbEventSink
from services.db.models import (
    ContentBlob,
    ExecutionEvent,
    NodeExecution,
    ToolCallRecord,
    WorkspaceCheckpoint,
)
from services.db.retention import check_days, prune_finished
from services.db.session import Database
from services.execution.errors import ErrorCode, ExecutionError
from services.execution.ports import AgentEvent, AgentEventKind
from tests.integration.databases import url_of
from tests.integration.db.cli_helpers import studio
from tests.integration.db.helpers import new_execution
from tests.support.redaction import settings_redactor

BIG = "".join(f"row {n}\n" for n in range(2_000))


def _execution(db: Database, status: str, age_days: float, *, finished: bool = True) -> str:
    execution_id = new_execution(db)
    call = {"call_id": "c1", "tool_name": "workspace_write_file", "domain": "workspace",
            "operation": "write_file", "args": {"path": "a", "content": BIG}}
    sink = DbEventSink(db, settings_redactor())
    sink.emit(AgentEvent(AgentEventKind.TOOL_CALL, execution_id, 1, {"call": call}))
    when = utcnow() - timedelta(days=age_days)
    with db.session() as session:
        session.add(WorkspaceCheckpoint(execution_id=execution_id, seq=1, base_commit="0" * 40,
                                        size_bytes=1, sha256="0" * 64, patch=b"x"))
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id).values(
            status=status, finished_at=when if finished else None, updated_at=when))
    return execution_id


def _left(db: Database) -> dict[str, set[str]]:
    tables = {"executions": NodeExecution.id, "events": ExecutionEvent.execution_id,
              "calls": ToolCallRecord.execution_id, "checkpoints": WorkspaceCheckpoint.execution_id,
              "blobs": ContentBlob.execution_id}
    with db.engine.connect() as conn:
        return {name: set(conn.execute(select(column).distinct()).scalars())
                for name, column in tables.items()}


def test_prune_deletes_old_finished_executions_and_all_they_hold(db: Database) -> None:
    old_done = _execution(db, "succeeded", 40)
    old_failed = _execution(db, "failed", 31, finished=False)  # no finished_at: updated_at
    recent = _execution(db, "succeeded", 5)
    running = _execution(db, "running", 90, finished=False)
    url = url_of(db)

    dry = studio(url, "db", "prune", "--older-than-days", "30", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["executions"] == 2
    assert old_done in _left(db)["executions"]

    done = studio(url, "db", "prune", env={"STUDIO_RETENTION_DAYS": "30"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert (report["executions"], report["older_than_days"], report["dry_run"]) == (2, 30, False)
    kept = {recent, running}
    for table, ids in _left(db).items():
        assert ids == kept, table
    assert old_failed not in _left(db)["executions"]


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1.5", "36501", "99999999999999999999",
                                   "nan", "", "1e3"])
def test_hostile_retention_values_are_refused_and_delete_nothing(db: Database,
                                                                  value: str) -> None:
    old = _execution(db, "succeeded", 400)
    url = url_of(db)
    by_option = studio(url, "db", "prune", "--older-than-days", value)
    assert by_option.returncode == 2, by_option.stdout
    by_setting = studio(url, "db", "prune", env={"STUDIO_RETENTION_DAYS": value})
    assert by_setting.returncode == 2, by_setting.stdout
    assert "invalid configuration" in by_setting.stderr or "retention" in by_setting.stderr
    assert old in _left(db)["executions"]


def test_prune_without_a_retention_is_a_config_error(db: Database) -> None:
    old = _execution(db, "succeeded", 400)
    proc = studio(url_of(db), "db", "prune")
    assert proc.returncode == 2
    assert json.loads(proc.stdout)["error"]["code"] == "config_error"
    assert old in _left(db)["executions"]


@pytest.mark.parametrize("days", [0, -3, 36_501, 2.5, True, "7", None, float("nan")])
def test_the_prune_function_refuses_what_is_not_a_day_count(db: Database, days: object) -> None:
    with pytest.raises(ExecutionError) as refused:
        check_days(days)
    assert refused.value.code is ErrorCode.INVALID_ARGUMENTS
    with pytest.raises(ExecutionError):
        prune_finished(db, days)  # type: ignore[arg-type]


def test_prune_works_in_batches(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """Five executions in batches of two: three ``DELETE`` statements on the executions table
    (seen on the wire by a ``before_cursor_execute`` listener), of two, two and one id."""
    from services.db import retention

    monkeypatch.setattr(retention, "BATCH", 2)
    ids = {_execution(db, "cancelled", 10) for _ in range(5)}
    table = NodeExecution.__tablename__
    deletes: list[int] = []

    def seen(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any,
             executemany: bool) -> None:
        words = statement.split()
        if [w.upper().strip('"') for w in words[:3]] == ["DELETE", "FROM", table.upper()]:
            deletes.append(len(parameters))  # one bound id per execution in the batch

    event.listen(db.engine, "before_cursor_execute", seen)
    try:
        result = prune_finished(db, 7)
    finally:
        event.remove(db.engine, "before_cursor_execute", seen)
    assert result.executions == 5
    assert deletes == [2, 2, 1], deletes
    with db.engine.connect() as conn:
        left = conn.execute(select(func.count()).select_from(NodeExecution)).scalar_one()
    assert left == 0 and len(ids) == 5


def test_the_reaper_applies_the_retention_when_it_is_set(db: Database, tmp_path: Path) -> None:
    from services.runs.reaper import reap_retention
    from tests.support.settings import sqlite_settings

    old, recent = _execution(db, "succeeded", 40), _execution(db, "failed", 2)
    unset = sqlite_settings(tmp_path / "unused.db")
    assert reap_retention(db, unset) == 0
    assert reap_retention(db, unset.model_copy(update={"retention_days": 30})) == 1
    assert _left(db)["executions"] == {recent} and old not in _left(db)["events"]
