"""A database URL per test, once for SQLite and once for PostgreSQL (the persistence fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.db.conftest import (  # noqa: F401  (fixtures used by name)
    create_pg_database,
    drop_pg_database,
    pg_admin,
)


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database for a run of the real CLI; PostgreSQL ones are migrated first."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'studio.db'}"
        from pydantic import SecretStr

        from services.db.session import open_database
        from services.settings import StudioSettings

        open_database(StudioSettings(database_url=SecretStr(url),
                                     data_dir=tmp_path)).dispose()  # migrated, as a CLI would
        yield url
        return
    admin: str = request.getfixturevalue("pg_admin")
    url = create_pg_database(admin)
    from services.db import migrate
    from services.db.session import create_db_engine

    engine = create_db_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    yield url
    drop_pg_database(admin, url)
