"""Migrations: head, base, head again, and no drift between the models and the scripts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, inspect

from services.db import migrate, models  # noqa: F401  (registers the tables)
from services.db.base import Base
from services.db.session import create_db_engine, open_database
from services.execution.errors import ConfigError
from services.settings import StudioSettings

TABLES = {"flowcharts", "nodes", "edges", "flowchart_runs", "node_executions",
          "execution_events", "tool_calls", "runtime_settings", "integrations", "mcp_servers",
          "budget_ledger", "api_tokens"}


@pytest.fixture(params=["sqlite", "postgres"])
def empty_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'empty.db'}"
    else:
        url = request.getfixturevalue("fresh_pg_url")
    engine = create_db_engine(url)
    request.addfinalizer(engine.dispose)
    return engine


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade_without_drift(empty_engine: Engine) -> None:
    assert set(Base.metadata.tables) >= TABLES
    migrate.upgrade(empty_engine)
    assert _tables(empty_engine) == set(Base.metadata.tables)
    assert migrate.differences(empty_engine) == []
    migrate.downgrade(empty_engine)
    assert _tables(empty_engine) == set()
    assert migrate.current_revisions(empty_engine) == set()
    migrate.upgrade(empty_engine)
    assert migrate.current_revisions(empty_engine) == migrate.head_revisions()
    assert migrate.differences(empty_engine) == []


def test_drift_is_detected(empty_engine: Engine) -> None:
    """The comparison can fail: a database missing a column is reported."""
    migrate.upgrade(empty_engine)
    with empty_engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE api_tokens")
    assert migrate.differences(empty_engine) != []


def test_embedded_sqlite_is_migrated_on_open(tmp_path: Path) -> None:
    settings = StudioSettings(data_dir=tmp_path / "nested" / "data")
    db = open_database(settings)
    try:
        assert (tmp_path / "nested" / "data" / "studio.db").is_file()
        assert migrate.current_revisions(db.engine) == migrate.head_revisions()
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    finally:
        db.dispose()


def test_postgres_behind_head_asks_for_db_upgrade(fresh_pg_url: str) -> None:
    settings = StudioSettings(database_url=SecretStr(fresh_pg_url))
    with pytest.raises(ConfigError, match=r"run `studio db upgrade`"):
        open_database(settings)
    studio = Path(sys.executable).with_name("studio")
    env = {**os.environ, "STUDIO_DATABASE_URL": fresh_pg_url}
    done = subprocess.run([str(studio), "db", "upgrade"], env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    db = open_database(settings)
    try:
        assert migrate.current_revisions(db.engine) == migrate.head_revisions()
    finally:
        db.dispose()
