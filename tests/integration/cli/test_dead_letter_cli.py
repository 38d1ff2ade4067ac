"""``studio executions list --status dead_lettered``, ``show``, ``retry`` and ``discard`` as
processes, on SQLite: the queue is listed with each execution's last error, ``discard`` ends one
``failed`` recorded as ``cli:<user>``, and anything else (an unknown id, one that is not
dead-lettered, one discarded already) exits 1 with its stable code and changes nothing."""

from __future__ import annotations

import getpass
import json
from pathlib import Path

from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, create_db_engine, open_database
from tests.integration.db.cli_helpers import studio
from tests.integration.db.helpers import new_execution
from tests.support.settings import sqlite_settings


def _dead_lettered(db: Database) -> str:
    execution_id = new_execution(db)
    error = {"attempt": 1, "code": "provider_unavailable", "kind": "infrastructure",
             "message": "[bold]503[/bold]", "at": utcnow().isoformat()}
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id).values(
            status="dead_lettered", last_error=error, attempt_errors=[error]))
    return execution_id


def test_the_dead_letter_queue_from_the_cli(tmp_path: Path) -> None:
    settings = sqlite_settings(tmp_path / "studio.db")
    db = open_database(settings)
    url = f"sqlite:///{tmp_path / 'studio.db'}"
    try:
        dead, queued = _dead_lettered(db), new_execution(db)
        listed = studio(url, "executions", "list", "--status", "dead_lettered", "--json")
        assert [e["id"] for e in json.loads(listed.stdout)] == [dead], listed.stderr
        shown = studio(url, "executions", "show", dead)
        assert "attempt_errors" in shown.stdout and "[bold]503[/bold]" in shown.stdout

        refused = studio(url, "executions", "discard", queued)
        assert refused.returncode == 1 and "not_dead_lettered" in refused.stderr
        unknown = studio(url, "executions", "retry", "no-such-id")
        assert unknown.returncode == 1 and "no execution" in unknown.stderr

        discarded = studio(url, "executions", "discard", dead)
        assert discarded.returncode == 0, discarded.stderr
        answer = json.loads(discarded.stdout.strip().splitlines()[-1])
        assert answer["status"] == "failed"
        assert [a["by"] for a in answer["operator_actions"]] == [f"cli:{getpass.getuser()}"]
        assert studio(url, "executions", "retry", dead).returncode == 1  # not any more
        check = Database(create_db_engine(url))
        rows = {i: ExecutionRepository(check).get(i) for i in (dead, queued)}
        check.dispose()
        assert rows[dead] is not None and rows[dead].error_code == "dead_lettered"  # type: ignore[union-attr]
        assert rows[queued] is not None and rows[queued].status == "queued"  # type: ignore[union-attr]
    finally:
        db.dispose()
