"""A killed eval resumes without running a finished task again: ``studio eval run`` is killed
(SIGKILL; its ``studio execute`` child dies with it) while its second task runs; the same command
again (``--id``) grades the remaining tasks and leaves the finished one alone."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from services.db.evals import EvalRepository, ItemRow
from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, open_database
from tests.integration.evals.eval_env import STUDIO, eval_env, report, studio, write_value_task
from tests.support import warm_cli
from tests.support.settings import sqlite_settings

RUN_ID = "killed-half-way"


def _items(db: Database) -> dict[str, ItemRow]:
    return {i.key.task_id: i for i in EvalRepository(db).items(RUN_ID)}


def _wait_for(db: Database, ready: Any, proc: subprocess.Popen[str]) -> dict[str, ItemRow]:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        items = _items(db)
        if ready(items):
            return items
        time.sleep(0.1)
    raise AssertionError(f"the eval never got there (exit {proc.poll()})")


def _row(db: Database, execution_id: str | None) -> NodeExecution:
    assert execution_id is not None
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    return row


def test_a_killed_eval_resumes_without_running_a_finished_task_again(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    for name, slow in (("a-first", False), ("b-killed", True), ("c-last", False)):
        write_value_task(suite, name, slow=slow)
    (suite / "suite.json").write_text(json.dumps({"name": "resume"}))
    path = tmp_path / "studio.db"
    db = open_database(sqlite_settings(path))
    env = eval_env(f"sqlite:///{path}", tmp_path / "home")
    for key, value in (("lease_ttl_s", "3"), ("heartbeat_s", "1")):
        assert studio(env, "settings", "set", key, value).returncode == 0
    argv = [*STUDIO, "eval", "run", str(suite), "--concurrency", "1", "--id", RUN_ID, "--json"]
    proc = warm_cli.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          text=True)
    try:
        before = _wait_for(db, lambda items: len(items) == 3 and items["a-first"].grade
                           and _started(db, items["b-killed"]), proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    first = before["a-first"]
    first_seq = _row(db, first.execution_id).event_seq
    assert before["b-killed"].grade is None and before["c-last"].execution_id is None

    again = report(studio(env, "eval", "run", str(suite), "--concurrency", "1", "--id", RUN_ID,
                          "--json"))
    after = _items(db)
    assert all(i.grade is not None and i.grade.resolved for i in after.values()), again
    # the finished task: the same execution, graded once, not run again (its journal is as
    # it was); the killed one: its own execution resumed, no second one
    assert after["a-first"].execution_id == first.execution_id
    assert after["a-first"].graded_at == first.graded_at
    assert _row(db, first.execution_id).event_seq == first_seq
    assert after["b-killed"].execution_id == before["b-killed"].execution_id
    assert _row(db, after["b-killed"].execution_id).lease_epoch >= 2  # a second attempt
    executions = EvalRepository(db).execution_ids(RUN_ID)
    assert sorted(executions) == sorted({i.execution_id for i in after.values()})
    with db.session() as session:  # no execution of this eval exists but the three linked
        assert session.query(NodeExecution).count() == 3
    finished = [e for e in ExecutionRepository(db).events(str(after["b-killed"].execution_id))
                if e.kind == "finished"]
    assert len(finished) == 1
    db.dispose()


def _started(db: Database, item: ItemRow) -> bool:
    """The item's execution has run its first tool call (the sleep)."""
    if item.execution_id is None:
        return False
    return any(e.kind == "tool_call" for e in ExecutionRepository(db).events(item.execution_id))
