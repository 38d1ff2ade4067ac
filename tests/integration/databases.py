"""Databases for the persistence tests: a SQLite file and a real PostgreSQL database.

PostgreSQL runs at 127.0.0.1:5432 with trust auth (user ``postgres`` or ``root``). One fresh
database ``studio_test_<random>`` is created and migrated per test session and dropped at its end;
tables are emptied after each test. Outside CI, a missing server skips the PostgreSQL half; in CI
it fails (nothing is skipped there). The fixtures over these helpers live in
``tests/integration/conftest.py``.
"""

from __future__ import annotations

import uuid

import psycopg
from sqlalchemy import text

from services.db import migrate, models  # noqa: F401  (registers the tables)
from services.db.base import Base
from services.db.session import Database, create_db_engine

PG_USERS = ("postgres", "root")
PG_HOST = "127.0.0.1:5432"


def admin_conninfo() -> str | None:
    """A conninfo for the ``test`` database as the first user that works, or ``None``."""
    for user in PG_USERS:
        conninfo = f"postgresql://{user}@{PG_HOST}/test"
        try:
            with psycopg.connect(conninfo, connect_timeout=3):
                return conninfo
        except psycopg.OperationalError:
            continue
    return None


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


def create_migrated_pg_database(admin: str) -> str:
    """A new PostgreSQL database migrated to head; answers its SQLAlchemy URL."""
    url = create_pg_database(admin)
    engine = create_db_engine(url)
    migrate.upgrade(engine)
    engine.dispose()
    return url


def empty_tables(db: Database) -> None:
    names = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
    with db.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} CASCADE"))


def url_of(db: Database) -> str:
    """The database URL, to hand to a child process."""
    return db.engine.url.render_as_string(hide_password=False)
