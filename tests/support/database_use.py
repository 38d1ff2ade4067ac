"""Counts how code uses the database, through SQLAlchemy's own event hooks (not a fake: every
statement still reaches the real database).

:func:`database_use` listens on the :class:`~sqlalchemy.engine.Engine` class, so it sees every
engine created while it listens, however the code under test opens it: the engines that
connected (one per ``open_database``, told apart by their connection pools), the schema checks
(statements on ``alembic_version``) and the ``SELECT`` statements of a given shape.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import Pool


@dataclass
class DatabaseUse:
    """What was seen while :func:`database_use` listened."""

    pools: dict[int, Pool] = field(default_factory=dict)  # held: an id is never reused
    statements: list[str] = field(default_factory=list)

    @property
    def engines(self) -> int:
        """How many engines connected (an engine with other execution options shares its
        parent's pool: one engine)."""
        return len(self.pools)

    @property
    def schema_checks(self) -> int:
        return sum("alembic_version" in s for s in self.statements)

    def selects(self, *fragments: str) -> int:
        """How many ``SELECT`` statements hold every one of ``fragments``."""
        return sum(1 for s in self.statements if s.lstrip().upper().startswith("SELECT")
                   and all(fragment in s for fragment in fragments))


@contextmanager
def database_use() -> Iterator[DatabaseUse]:
    """Count the engines connecting and the statements run while the block runs."""
    seen = DatabaseUse()

    def connected(conn: Connection) -> None:
        pool = conn.engine.pool
        seen.pools[id(pool)] = pool

    def executing(conn: Connection, cursor: Any, statement: str, *args: Any) -> None:
        seen.statements.append(statement)

    event.listen(Engine, "engine_connect", connected)
    event.listen(Engine, "before_cursor_execute", executing)
    try:
        yield seen
    finally:
        event.remove(Engine, "engine_connect", connected)
        event.remove(Engine, "before_cursor_execute", executing)
