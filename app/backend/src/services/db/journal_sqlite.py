"""The connections a buffered journal keeps on SQLite.

A loop's journal commits twice a step and its checks read once; each was a connection checked out
of the pool and given back (the pool's events, its reset on return). A buffered journal on SQLite
keeps two connections for the loop instead: one for its commits (``BEGIN IMMEDIATE``, as
:meth:`~services.db.session.Database.transaction`), one for the reads before the calls (deferred
``BEGIN``, as :meth:`~services.db.session.Database.read`), and gives them back when it closes.
Between transactions a kept connection holds no lock (WAL). A transaction that fails gives its
connection back to the pool; the next one checks out another.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy import Connection

from services.db.session import Database

T = TypeVar("T")


class SqliteHold:
    """The write and the read connection of one buffered journal."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._write: Connection | None = None
        self._read: Connection | None = None

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction on the kept connection, committed when the block ends."""
        if self._write is None:
            self._write = self._db.engine.connect()
        connection = self._write
        try:
            with connection.begin():
                yield connection
        except BaseException:
            self._write = None
            connection.close()
            raise

    def read(self, what: str, query: Callable[[Connection], T]) -> T:
        """``query`` in a read transaction on the kept read connection (``what`` names the read
        for :meth:`~services.db.session.Database.read`'s callers; a SQLite file loses no
        connection, so nothing is run again)."""
        if self._read is None:
            self._read = self._db.read_engine.connect()
        connection = self._read
        try:
            with connection.begin():
                return query(connection)
        except BaseException:
            self._read = None
            connection.close()
            raise

    def close(self) -> None:
        """Give both connections back to the pool."""
        for connection in (self._write, self._read):
            if connection is not None:
                connection.close()
        self._write = self._read = None
