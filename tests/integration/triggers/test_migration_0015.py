"""Migration 0015 (the trigger tables) upgrades a database of the previous release (0013)
without loss, on SQLite and PostgreSQL, and downgrades back to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from services.db import migrate
from services.db.session import create_db_engine

NEW = {"github_deliveries", "github_triggers", "trigger_slots"}


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    built = create_db_engine(url)
    request.addfinalizer(built.dispose)
    return built


def test_a_0013_database_upgrades_without_loss_and_downgrades(engine: Engine) -> None:
    migrate.upgrade(engine, "0013")
    assert not NEW & set(inspect(engine).get_table_names())
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO runtime_settings (key, value, updated_at) "
                          "VALUES ('max_iterations', '7', CURRENT_TIMESTAMP)"))
        conn.execute(text("INSERT INTO integrations (kind, api_url, updated_at) "
                          "VALUES ('github', 'https://ghe.example/api/v3', CURRENT_TIMESTAMP)"))
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= NEW
    assert migrate.differences(engine) == []

    def kept() -> tuple[object, object]:
        with engine.connect() as conn:
            return (conn.execute(text("SELECT value FROM runtime_settings")).scalar(),
                    conn.execute(text("SELECT api_url FROM integrations")).scalar())

    assert [str(value) for value in kept()] == ["7", "https://ghe.example/api/v3"]
    migrate.downgrade(engine, "0013")
    assert not NEW & set(inspect(engine).get_table_names())
    assert kept()[1] == "https://ghe.example/api/v3"
