"""Databases for the persistence tests: a SQLite file and a real PostgreSQL database.

PostgreSQL runs at 127.0.0.1:5432 with trust auth (user ``postgres`` or ``root``). One fresh
database ``studio_test_<random>`` is created and migrated per test session and dropped at its end;
tables are emptied after each test. Outside CI, a missing server skips the PostgreSQL half; in CI
it fails (nothing is skipped there). The fixtures over these helpers live in
``tests/integration/conftest.py``.

A database "migrated to head" is a copy of a template this test process migrated once: for
PostgreSQL a template database (``CREATE DATABASE ... TEMPLATE``: the same tables, functions,
rows and ``alembic_version`` the migrations write), for SQLite a file copied byte for byte. Running
the 20-odd migrations for every test cost about 0.15 s of CPU and seconds of synced writes each
(issue 28); the migrations themselves stay tested where they are the subject
(``tests/integration/db``). Templates are dropped when the process exits.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from sqlalchemy import text

from services.db import migrate, models  # noqa: F401  (registers the tables)
from services.db.base import Base
from services.db.session import Database, create_db_engine, open_database
from tests.support.settings import sqlite_settings

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


def create_pg_database(admin: str, *, name: str | None = None, template: str | None = None
                       ) -> str:
    """Create a database (empty, or a copy of ``template``); answers its SQLAlchemy URL."""
    name = name or f"studio_test_{uuid.uuid4().hex[:12]}"
    copy = f' TEMPLATE "{template}"' if template else ""
    for attempt in range(20):  # a template is never opened; a stray session would only delay
        try:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"{copy}')
            break
        except psycopg.errors.ObjectInUse:
            if not template or attempt == 19:
                raise
            time.sleep(0.1)
    return _url(admin, name)


def drop_pg_database(admin: str, url: str) -> None:
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def create_migrated_pg_database(admin: str) -> str:
    """A new PostgreSQL database at head (a copy of this process's template); answers its
    SQLAlchemy URL."""
    template = _pg_templates.get(admin) or _create_pg_template(admin)
    return create_pg_database(admin, template=template)


TEMPLATE_PREFIX = "studio_test_template_"
_pg_templates: dict[str, str] = {}  # admin conninfo -> this process's template database


def _create_pg_template(admin: str) -> str:
    """Create and migrate this process's template database, closed to connections (so that no
    session, not even autovacuum's, keeps ``CREATE DATABASE ... TEMPLATE`` waiting)."""
    _drop_orphan_pg_templates(admin)
    name = f"{TEMPLATE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:8]}"
    engine = create_db_engine(create_pg_database(admin, name=name))
    migrate.upgrade(engine)
    engine.dispose()
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
    _pg_templates[admin] = name
    atexit.register(_drop_pg_template, admin, name)
    return name


def _drop_orphan_pg_templates(admin: str) -> None:
    """Drop the templates of test processes of this machine that are gone (killed before their
    exit handler ran)."""
    with psycopg.connect(admin, autocommit=True) as conn:
        names = [row[0] for row in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (TEMPLATE_PREFIX + "%",))]
    for name in names:
        pid = name.removeprefix(TEMPLATE_PREFIX).split("_", 1)[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _drop_pg_template(admin, name)


def _drop_pg_template(admin: str, name: str) -> None:
    with contextlib.suppress(psycopg.Error), psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _url(admin: str, name: str) -> str:
    user = admin.split("//", 1)[1].split("@", 1)[0]
    return f"postgresql+psycopg://{user}@{PG_HOST}/{name}"


_sqlite_template: list[Path] = []  # this process's migrated SQLite file, once made


def write_migrated_sqlite(target: Path) -> None:
    """Put a SQLite database at head at ``target`` (which must not exist): a copy of this
    process's template file, which ``open_database`` migrated once. The copy keeps the file's
    private mode (0600); its folder is made 0700 when missing, as ``open_database`` does."""
    if not _sqlite_template:
        folder = Path(tempfile.mkdtemp(prefix="studio-sqlite-template-"))
        atexit.register(shutil.rmtree, folder, True)
        template = folder / "template.db"
        open_database(sqlite_settings(template)).dispose()
        _sqlite_template.append(template)
    assert not target.exists(), target
    if not target.parent.exists():
        target.parent.mkdir(parents=True)
        target.parent.chmod(0o700)
    shutil.copy(_sqlite_template[0], target)  # the mode bits too


def empty_tables(db: Database) -> None:
    names = ", ".join(f'"{table.name}"' for table in Base.metadata.sorted_tables)
    with db.engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} CASCADE"))


def url_of(db: Database) -> str:
    """The database URL, to hand to a child process."""
    return db.engine.url.render_as_string(hide_password=False)
