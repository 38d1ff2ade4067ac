"""Databases for the persistence tests: a SQLite file and a real PostgreSQL database.

PostgreSQL runs at 127.0.0.1:5432 with trust auth (user ``postgres`` or ``root``). One fresh
database ``studio_test_<random>`` is created and migrated per test session and dropped at its end;
tables are emptied after each test. Outside CI, a missing server skips the PostgreSQL half; in CI
it fails (nothing is skipped there).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from pydantic import SecretStr
from sqlalchemy import text

from services.db import migrate, models  # noqa: F401  (registers the tables)
from services.db.base import Base
from services.db.session import Database, create_db_engine, open_database
from services.settings import StudioSettings
from tests.conftest import IN_CI

PG_USERS = ("postgres", "root")
PG_HOST = "127.0.0.1:5432"


def _admin_conninfo() -> str | None:
    for user in PG_USERS:
        conninfo = f"postgresql://{user}@{PG_HOST}/test"
        try:
            with psycopg.connect(conninfo, connect_timeout=3):
                return conninfo
        except psycopg.OperationalError:
            continue
    return None


@pytest.fixture(scope="session")
def pg_admin() -> str:
    """A conninfo for the ``test`` database, used to create and drop test databases."""
    conninfo = _admin_conninfo()
    if conninfo is None:
        message = f"PostgreSQL is not reachable at {PG_HOST} (users {PG_USERS})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return conninfo


def create_pg_database(admin: str) -> str:
    """Create an empty database; answers its SQLAlchemy URL."""
    name = f"studio_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    user = admin.split("//", 1)[1].split("@", 1)[0]
    return f"postgresql+psycopg://{user}@{PG_HOST}/{name}"


def drop_pg_database(admin: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def fresh_pg_url(pg_admin: str) -> Iterator[str]:
    """An empty PostgreSQL database of its own (migration tests)."""
    url = create_pg_database(pg_admin)
    yield url
    drop_pg_database(pg_admin, url)


def create_migrated_pg_database(admin: str) -> str:
    """A new PostgreSQL database migrated to head; answers its SQLAlchemy URL."""
    url = create_pg_database(admin)
    engine = create_db_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return url


@pytest.fixture(scope="session")
def postgres_url(pg_admin: str) -> Iterator[str]:
    """The session's PostgreSQL database, migrated to head once."""
    url = create_migrated_pg_database(pg_admin)
    yield url
    drop_pg_database(pg_admin, url)


def _empty_tables(db: Database) -> None:
    names = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
    with db.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} CASCADE"))


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[Database]:
    db = Database(create_db_engine(postgres_url))
    yield db
    _empty_tables(db)
    db.dispose()


def sqlite_settings(path: Path, **values: object) -> StudioSettings:
    return StudioSettings(database_url=SecretStr(f"sqlite:///{path}"), data_dir=path.parent,
                          **values)  # type: ignore[arg-type]


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    """An embedded SQLite database, migrated by ``open_database`` as in production."""
    db = open_database(sqlite_settings(tmp_path / "studio.db"))
    yield db
    db.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Database:
    """Each test using it runs once on SQLite and once on PostgreSQL."""
    database: Database = request.getfixturevalue(f"{request.param}_db")
    return database


def url_of(db: Database) -> str:
    """The database URL, to hand to a child process."""
    return db.engine.url.render_as_string(hide_password=False)
