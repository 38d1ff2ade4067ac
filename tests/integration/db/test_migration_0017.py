"""Migration 0017 (retries and the dead-letter queue) on a database of the previous release,
SQLite and PostgreSQL: the executions recorded before keep every value, the four new columns
start empty, and a downgrade to 0013 keeps the rows too."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from services.db import migrate
from services.db.session import create_db_engine

ROW = {"id": "00000000-0000-4000-8000-000000000017", "status": "failed", "runtime": "agent",
       "provider": "codex", "model": "gpt", "prompt": "fix it", "request": "{}",
       "limits": "{}", "settings_snapshot": "{}", "cost_usd": 0.25, "iterations": 3,
       "cancel_requested": False, "event_seq": 7, "lease_epoch": 2, "yielded_attempts": 0,
       "error_code": "provider_unavailable", "error_message": "503",
       "created_at": "2026-11-28 10:00:00+00:00", "updated_at": "2026-11-28 10:00:00+00:00"}
KEPT = ("status", "provider", "prompt", "cost_usd", "iterations", "event_seq", "lease_epoch",
        "error_code", "error_message")


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    created = create_db_engine(url)
    request.addfinalizer(created.dispose)
    return created


def _row(engine: Engine, columns: tuple[str, ...]) -> dict[str, object]:
    with engine.connect() as connection:
        found = connection.execute(text(f"SELECT {', '.join(columns)} FROM node_executions "
                                        "WHERE id = :id"), {"id": ROW["id"]}).mappings().one()
    return dict(found)


def test_0017_upgrades_a_0013_database_without_loss(engine: Engine) -> None:
    migrate.upgrade(engine, "0013")
    with engine.begin() as connection:
        connection.execute(text(f"INSERT INTO node_executions ({', '.join(ROW)}) VALUES "
                                f"({', '.join(':' + k for k in ROW)})"), ROW)
    before = _row(engine, KEPT)
    migrate.upgrade(engine, "0017")
    assert migrate.current_revisions(engine) == {"0017"}
    assert _row(engine, KEPT) == before
    assert before["error_code"] == "provider_unavailable"  # the witness reads real values
    assert set(_row(engine, ("retry_at", "last_error", "attempt_errors",
                             "operator_actions")).values()) == {None}
    migrate.downgrade(engine, "0013")
    assert _row(engine, KEPT) == before
