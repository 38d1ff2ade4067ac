"""The fixtures every integration test may ask for by name (pytest finds them here).

* databases: ``pg_admin``, ``postgres_url`` (the session's migrated PostgreSQL database),
  ``fresh_pg_url`` (an empty one per test), ``db_url`` (a migrated one per test, SQLite then
  PostgreSQL), ``postgres_db``, ``sqlite_db`` and ``db`` (each test
  once on SQLite, once on PostgreSQL); helpers in :mod:`tests.integration.databases`;
* ``redis_broker``: a Redis database of the test's own on the real broker (helpers in
  :mod:`tests.integration.celery_fixtures`);
* ``mcp_http_url``, ``mcp_config_file``, ``mcp_hub``: the two demo MCP servers and a started hub
  (helpers in :mod:`tests.integration.mcp_fixtures`);
* ``api``: one running ``studio api`` per test module (:mod:`tests.integration.api.server`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.session import Database, create_db_engine, open_database
from services.execution.mcp.bridge import McpHub
from tests.conftest import IN_CI
from tests.integration.api.server import ApiServer, running_api
from tests.integration.celery_fixtures import Broker, claimed_broker
from tests.integration.databases import (
    PG_HOST,
    PG_USERS,
    admin_conninfo,
    create_migrated_pg_database,
    create_pg_database,
    drop_pg_database,
    empty_tables,
    write_migrated_sqlite,
)
from tests.integration.mcp_fixtures import stdio_server_entry, write_mcp_config
from tests.support.mcp_servers import running_http_server
from tests.support.settings import sqlite_settings


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty migrated database per test, SQLite then PostgreSQL (for the real CLI, or a
    worker or API process, to open by URL)."""
    if request.param == "sqlite":
        path = tmp_path / "studio.db"
        write_migrated_sqlite(path)  # at head, as a CLI would leave it
        yield f"sqlite:///{path}"
        return
    admin: str = request.getfixturevalue("pg_admin")
    url = create_migrated_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


@pytest.fixture(scope="session")
def pg_admin() -> str:
    """A conninfo for the ``test`` database, used to create and drop test databases."""
    conninfo = admin_conninfo()
    if conninfo is None:
        message = f"PostgreSQL is not reachable at {PG_HOST} (users {PG_USERS})"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return conninfo


@pytest.fixture
def fresh_pg_url(pg_admin: str) -> Iterator[str]:
    """An empty PostgreSQL database of its own (migration tests)."""
    url = create_pg_database(pg_admin)
    yield url
    drop_pg_database(pg_admin, url)


@pytest.fixture(scope="session")
def postgres_url(pg_admin: str) -> Iterator[str]:
    """The session's PostgreSQL database, migrated to head once."""
    url = create_migrated_pg_database(pg_admin)
    yield url
    drop_pg_database(pg_admin, url)


@pytest.fixture
def postgres_db(postgres_url: str) -> Iterator[Database]:
    db = Database(create_db_engine(postgres_url))
    yield db
    empty_tables(db)
    db.dispose()


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Iterator[Database]:
    """An embedded SQLite database at head (a copy of the process's migrated template),
    opened by ``open_database`` as in production."""
    path = tmp_path / "studio.db"
    write_migrated_sqlite(path)
    db = open_database(sqlite_settings(path))
    yield db
    db.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest) -> Database:
    """Each test using it runs once on SQLite and once on PostgreSQL."""
    database: Database = request.getfixturevalue(f"{request.param}_db")
    return database


@pytest.fixture
def redis_broker() -> Iterator[Broker]:
    """A Redis database of the test's own on the real broker (:func:`claimed_broker`)."""
    with claimed_broker() as broker:
        yield broker


@pytest.fixture
def mcp_http_url() -> Iterator[str]:
    """The URL of a streamable-HTTP demo server, running for this test only."""
    with running_http_server() as url:
        yield url


@pytest.fixture
def mcp_config_file(tmp_path: Path, mcp_http_url: str) -> Path:
    """A config file naming the ``local`` (stdio) and ``remote`` (HTTP) demo servers."""
    return write_mcp_config(tmp_path / "mcp.json", {
        "local": stdio_server_entry(),
        "remote": {"transport": "http", "url": mcp_http_url},
    })


@pytest.fixture
def mcp_hub(mcp_config_file: Path) -> Iterator[McpHub]:
    """A hub with both demo servers connected (strict: a failed server fails the fixture)."""
    hub = McpHub.from_file(mcp_config_file, base_env={"LANG": "C.UTF-8"})
    hub.start(strict=True)
    try:
        yield hub
    finally:
        hub.close()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """One running ``studio api`` per test module, with its own database and git host."""
    with running_api(tmp_path_factory.mktemp("api")) as server:
        yield server
