"""Engines and sessions: :class:`Database` and :func:`open_database`.

``STUDIO_DATABASE_URL`` selects the database: ``postgresql+psycopg://...`` in production (plain
``postgresql://`` is read as psycopg 3), else the embedded default, a SQLite file
``<data_dir>/studio.db``. An embedded SQLite database is migrated on open; a PostgreSQL database
behind the migrations is refused with a request to run ``studio db upgrade``.

SQLite runs in WAL mode with a busy timeout and foreign keys on, with ``synchronous = NORMAL``
(a commit survives the process being killed; a power cut may lose the last commits, never the
database's consistency: see ``docs/sphinx/persistence.rst``). Every write transaction starts with
``BEGIN IMMEDIATE``: writers queue on the database lock up front instead of failing later with
``SQLITE_BUSY`` when a read turns into a write (this is what makes the budget and the journal's
sequence counter atomic across processes). :meth:`Database.read_session` is for reads only: on
SQLite it begins a deferred transaction, which takes no lock a writer waits for; on PostgreSQL it
runs in autocommit mode (one round trip per statement).

A PostgreSQL engine pings a pooled connection before handing it out and, once it has reached its
database, waits for it (with backoff, for a while) when it refuses connections:
:mod:`services.db.connection_loss`, which also re-runs the statements that are safe to run twice
(:meth:`Database.read` for reads).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session as OrmSession
from sqlalchemy.orm import configure_mappers, sessionmaker

from services.db import migrate
from services.db.connection_loss import rerun, wait_for_reconnects
from services.db.statements import execute_sql
from services.execution.errors import ConfigError
from services.settings import StudioSettings
from services.telemetry.instrumentation import instrument_sqlalchemy

SQLITE_BUSY_TIMEOUT_MS = 30_000
T = TypeVar("T")


def resolve_url(settings: StudioSettings) -> str:
    """The SQLAlchemy URL to use: the configured one, else ``<data_dir>/studio.db``."""
    if settings.database_url is None:
        return f"sqlite:///{Path(settings.data_dir) / 'studio.db'}"
    url = settings.database_url.get_secret_value()
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix):]
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    dbapi_connection.isolation_level = None  # we issue BEGIN ourselves (see the module docstring)
    cursor = dbapi_connection.cursor()
    cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA journal_mode = WAL")
    cursor.execute("PRAGMA synchronous = NORMAL")
    cursor.execute("PRAGMA foreign_keys = ON")
    cursor.close()


READ_ONLY_OPTION = "studio_read_only"


def _sqlite_begin(connection: Any) -> None:
    if connection.get_execution_options().get(READ_ONLY_OPTION):
        execute_sql(connection, "BEGIN")  # deferred: a WAL reader blocks no writer
    else:
        execute_sql(connection, "BEGIN IMMEDIATE")


def _private_file(path: Path) -> None:
    """Make ``path`` (and its directory, when missing) readable by this user only: 0600 in a
    0700 directory. The database holds tool envelopes and checkpoint patches; SQLite gives its
    ``-wal`` and ``-shm`` files the mode of the database file."""
    if not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
    # Never open (and close) an existing database file: closing any descriptor of it drops the
    # POSIX locks SQLite holds through other connections of this process.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            with contextlib.suppress(PermissionError):  # not ours: leave it as it is
                os.chmod(path, 0o600)


def create_db_engine(url: str) -> Engine:
    """An engine for ``url``, with the SQLite settings described in the module docstring (and
    statement spans when tracing is on)."""
    engine = _engine(url)
    instrument_sqlalchemy(engine)
    return engine


def _engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        # a pooled connection that died while idle is replaced at checkout (pre-ping); a
        # database reached before is waited for when it refuses connections for a while
        engine = create_engine(url, pool_pre_ping=True)
        wait_for_reconnects(engine)
        return engine
    if parsed.database and parsed.database != ":memory:":
        _private_file(Path(parsed.database))
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})
    event.listen(engine, "connect", _sqlite_pragmas)
    event.listen(engine, "begin", _sqlite_begin)
    return engine


def dialect_name(target: Session | Connection) -> str:
    """``postgresql`` or ``sqlite``: the dialect of a session or a Core connection."""
    if isinstance(target, Connection):
        return str(target.dialect.name)
    return str(target.get_bind().dialect.name)


def dialect_insert(target: Session | Connection) -> Any:
    """The ``insert`` of the session's (or connection's) dialect (it has
    ``on_conflict_do_nothing`` on both). The dialect's module is imported here, not with this
    module: an engine loads its own dialect when it is created, and a SQLite process need not
    import PostgreSQL's (about 6 % of a short command's CPU)."""
    if dialect_name(target) == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


Session = OrmSession
"""One transaction's session, as :meth:`Database.session` yields it (for type hints above
this package)."""

DatabaseError = SQLAlchemyError
"""What a failed database operation raises (the database unreachable, a statement refused):
callers outside this package catch this name, not SQLAlchemy's."""


class Database:
    """An engine and its session factory; :meth:`session` commits at the boundary."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sessionmaker = sessionmaker(engine, expire_on_commit=False)
        read_options: dict[str, Any] = {READ_ONLY_OPTION: True}
        if engine.dialect.name == "postgresql":  # each SELECT its own transaction: no BEGIN
            read_options["isolation_level"] = "AUTOCOMMIT"
        self.read_engine = engine.execution_options(**read_options)
        self.read_sessionmaker = sessionmaker(self.read_engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """``postgresql`` or ``sqlite``."""
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits when the block ends, and rolls back on error."""
        with self.sessionmaker() as session, session.begin():
            yield session

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for reads only: on SQLite a deferred transaction (no write lock taken; a
        write in it may fail with ``database is locked``), on PostgreSQL autocommit (each
        statement its own snapshot, no ``BEGIN``/``COMMIT`` round trips)."""
        with self.read_sessionmaker() as session, session.begin():
            yield session

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A Core connection whose transaction commits when the block ends (rolls back on
        error): :meth:`session` without the ORM, for the hot paths (the journal)."""
        with self.engine.begin() as connection:
            yield connection

    @contextmanager
    def read_connection(self) -> Iterator[Connection]:
        """:meth:`read_session` without the ORM: a Core connection for reads only."""
        with self.read_engine.connect() as connection, connection.begin():
            yield connection

    def read(self, what: str, query: Callable[[Connection], T]) -> T:
        """``query`` on a :meth:`read_connection`, run again on a fresh connection when a lost
        connection cut it (:func:`~services.db.connection_loss.rerun`); ``what`` names it in
        the log and in the error when the database does not come back."""
        def once() -> T:
            with self.read_connection() as connection:
                return query(connection)

        return rerun(what, once)

    def ping(self) -> None:
        """One round trip (``SELECT 1``); raises :data:`DatabaseError` when it fails."""
        with self.engine.connect() as connection:
            connection.execute(text("SELECT 1"))

    def dispose(self) -> None:
        self.engine.dispose()


def _migrate_sqlite(engine: Engine) -> None:
    database = engine.url.database
    if not database or database == ":memory:":
        migrate.upgrade(engine)
        return
    if migrate.is_current(engine):  # the usual case: no Alembic, no lock
        return
    lock_path = Path(database).with_name(Path(database).name + ".migrate.lock")
    _private_file(lock_path)
    with lock_path.open("a") as lock:  # two processes opening a new database migrate one by one
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            migrate.upgrade(engine)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def preload_drivers() -> None:
    """Import the database drivers an engine loads when it first connects (a worker's fork
    server does it once for all of its children): psycopg and its SQLAlchemy dialect."""
    import psycopg  # noqa: F401
    import sqlalchemy.dialects.postgresql.psycopg  # noqa: F401
    import sqlalchemy.dialects.sqlite.pysqlite  # noqa: F401


def preload_mappers() -> None:
    """Configure the ORM's mappers, what a process's first query does otherwise (a worker's
    fork server does it once: its children then share the configured mappers instead of each
    building its own)."""
    import services.db.models  # noqa: F401  (every mapped class)

    configure_mappers()


def open_database(settings: StudioSettings, *, check: bool = True) -> Database:
    """Open the configured database; migrate it if it is the embedded SQLite file.

    With ``check`` (the default), a PostgreSQL database that is not at the head revision raises
    :class:`ConfigError`. ``studio db upgrade`` opens with ``check=False``.
    """
    engine = create_db_engine(resolve_url(settings))
    if engine.dialect.name == "sqlite":
        _migrate_sqlite(engine)
    elif check and not migrate.is_current(engine):
        current, heads = migrate.current_revisions(engine), migrate.head_revisions()
        if current != heads:
            engine.dispose()
            raise ConfigError(
                f"the database is at revision {sorted(current) or 'none'}, the code expects "
                f"{sorted(heads)}: run `studio db upgrade`",
                details={"current": sorted(current), "heads": sorted(heads)},
            )
    return Database(engine)
