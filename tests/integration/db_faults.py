"""Faults of the real PostgreSQL server for the connection-loss tests (issue 37).

* :func:`terminate_backends`: every session of one database ended by the server
  (``pg_terminate_backend``), what a failover, a connection pooler restart or an idle-connection
  reaper does to the processes using it (:func:`terminate_backend`: one session, by its pid);
* :func:`refusing_connections`: the database "restarted": every session ended and new ones
  refused (``ALTER DATABASE ... ALLOW_CONNECTIONS false``, which holds for superusers too) until
  the block ends;
* :class:`DropOnce`: the session a statement is about to run on ended by the server, once,
  right before the statement is sent (a SQLAlchemy ``before_cursor_execute`` listener that calls
  ``pg_terminate_backend`` from another connection: a real drop, the driver untouched).

Every fault is made from an administrator's connection to the ``test`` database, never from the
database under test.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, event


def database_name(url: str) -> str:
    return url.rsplit("/", 1)[1].split("?")[0]


def backend_pids(admin: str, database: str) -> list[int]:
    with psycopg.connect(admin, autocommit=True) as conn:
        return [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,))]


def terminate_backends(admin: str, database: str) -> int:
    """End every session of ``database``; answers how many there were. Waits until they are
    gone."""
    with psycopg.connect(admin, autocommit=True) as conn:
        pids = [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,))]
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _wait_gone(conn, pids)
    return len(pids)


def terminate_backend(admin: str, pid: int) -> None:
    """End the one session ``pid`` (a connection a test holds); waits until it is gone."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _wait_gone(conn, [pid])


def _wait_gone(conn: psycopg.Connection[Any], pids: list[int]) -> None:
    deadline = time.monotonic() + 30
    while pids and time.monotonic() < deadline:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)",
                            (pids,)).fetchone()
        if not left or not left[0]:
            return
        time.sleep(0.05)


@contextmanager
def refusing_connections(admin: str, database: str) -> Iterator[int]:
    """``database`` down for the block: its sessions ended, new ones refused; answers how many
    sessions were ended. Connections are allowed again when the block ends, however it ends."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
    try:
        yield terminate_backends(admin, database)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


class DropOnce:
    """Ends, once, the server session of the next statement containing ``marker`` on
    ``engine``, just before the statement is sent; :attr:`dropped` holds the pid ended."""

    def __init__(self, engine: Engine, admin: str, marker: str) -> None:
        self.engine = engine
        self.admin = admin
        self.marker = marker
        self.dropped: list[int] = []
        self.armed = True
        event.listen(engine, "before_cursor_execute", self._before)

    def _before(self, conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if not self.armed or self.marker not in statement:
            return
        self.armed = False
        pid = int(conn.connection.dbapi_connection.info.backend_pid)
        with psycopg.connect(self.admin, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            _wait_gone(admin, [pid])
        self.dropped.append(pid)

    def remove(self) -> None:
        event.remove(self.engine, "before_cursor_execute", self._before)
