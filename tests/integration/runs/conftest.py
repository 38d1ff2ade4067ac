"""A database URL per test, once for SQLite and once for PostgreSQL (the persistence fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.session import open_database
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.support.settings import sqlite_settings


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database for a run of the real CLI; PostgreSQL ones are migrated first."""
    if request.param == "sqlite":
        path = tmp_path / "studio.db"
        open_database(sqlite_settings(path)).dispose()  # migrated, as a CLI would
        yield f"sqlite:///{path}"
        return
    admin: str = request.getfixturevalue("pg_admin")
    url = create_migrated_pg_database(admin)
    yield url
    drop_pg_database(admin, url)
