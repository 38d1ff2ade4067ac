"""Core statements run on SQLite's own cursor: :class:`Statement`.

A loop's journal on SQLite runs the same dozen statements every step (the sequence counter, the
events, the evidence row, the charges, the read before the next call). SQLAlchemy executes a
compiled, cached Core statement through an execution context, parameter processing, events and
a result object: about a hundred Python calls each, several times the statement's own cost. A
:class:`Statement` is the same Core statement compiled once per dialect; on SQLite it binds the
parameters in order through the same bind processors (the column types': dates, JSON, ...), runs
the SQL text on the DBAPI connection inside the SQLAlchemy connection's transaction, and turns the
rows it returns into values through the same result processors. The same SQL with the same
values, the same values back (``tests/integration/db/test_sqlite_statements.py`` compares both
ways on each statement).

Executed through Core instead: on any other database; when something listens to the
connection's statements (``before_cursor_execute``: the statement spans of tracing, a test that
counts statements), so that it sees them all. A database error is raised as SQLAlchemy raises it
(:meth:`sqlalchemy.exc.DBAPIError.instance`). A statement whose columns get Python-side defaults
(``default=`` / ``onupdate=``) is refused when compiled: its caller passes those values.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any] | None


@dataclass(frozen=True)
class Result:
    """What a statement answered: its rows (values, processed), and the rows it changed."""

    rows: list[tuple[Any, ...]]
    rowcount: int

    def one_or_none(self) -> tuple[Any, ...] | None:
        if len(self.rows) > 1:
            raise exc.MultipleResultsFound("Multiple rows were found when one or none was required")
        return self.rows[0] if self.rows else None

    def one(self) -> tuple[Any, ...]:
        found = self.one_or_none()
        if found is None:
            raise exc.NoResultFound("No row was found when one was required")
        return found


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: tuple[str, ...]  # the parameter of each placeholder, in order
    bind: tuple[Processor, ...]
    constants: dict[str, Any]  # values the statement carries itself
    results: tuple[Processor, ...]


class Statement:
    """A Core statement, compiled once per dialect (:attr:`compilations` counts them)."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self.compilations = 0
        self._compiled: weakref.WeakKeyDictionary[Dialect, _Compiled] = (
            weakref.WeakKeyDictionary())

    def execute(self, connection: Connection, params: dict[str, Any]) -> Result:
        """Run it with ``params`` (named as its bind parameters)."""
        if not direct(connection):
            result = connection.execute(self.statement, params)
            rows = [tuple(row) for row in result] if result.returns_rows else []
            return Result(rows, result.rowcount)
        compiled = self._compile(connection.dialect)
        values = _values(compiled, params)
        cursor = self._run(connection, compiled, lambda raw: raw.execute(compiled.sql, values),
                           values)
        try:
            rowcount = cursor.rowcount  # as SQLAlchemy reads it: before the rows are fetched
            rows = cursor.fetchall() if cursor.description is not None else []
        finally:
            cursor.close()
        processors = compiled.results
        if rows and any(processors):
            rows = [tuple([value if process is None else process(value)
                           for process, value in zip(processors, row, strict=True)])
                    for row in rows]
        return Result(rows, rowcount)

    def execute_many(self, connection: Connection, params: Sequence[dict[str, Any]]) -> None:
        """Run it once per parameter set (``executemany``; no rows back)."""
        if not direct(connection):
            connection.execute(self.statement, list(params))
            return
        compiled = self._compile(connection.dialect)
        values = [_values(compiled, one) for one in params]
        self._run(connection, compiled, lambda raw: raw.executemany(compiled.sql, values),
                  values).close()

    @staticmethod
    def _run(connection: Connection, compiled: _Compiled, run: Callable[[Any], Any],
             values: Any) -> Any:
        return _run(connection, compiled.sql, run, values)

    def _compile(self, dialect: Dialect) -> _Compiled:
        found = self._compiled.get(dialect)
        if found is None:
            found = self._compiled[dialect] = _compile(self.statement, dialect)
            self.compilations += 1
        return found


def direct(connection: Connection) -> bool:
    """Whether statements on ``connection`` may go straight to its cursor: SQLite, and nobody
    listening to its statements."""
    dispatch = connection.dispatch
    return (connection.dialect.name == "sqlite" and not dispatch.before_cursor_execute
            and not dispatch.after_cursor_execute)


def execute_sql(connection: Connection, sql: str) -> None:
    """``sql`` (a fixed statement: ``BEGIN IMMEDIATE``) on the cursor where :func:`direct`
    allows it, else through ``exec_driver_sql``."""
    if not direct(connection):
        connection.exec_driver_sql(sql)
        return
    _run(connection, sql, lambda raw: raw.execute(sql), ()).close()


def _run(connection: Connection, sql: str, run: Callable[[Any], Any], values: Any) -> Any:
    raw = connection.connection.driver_connection
    dbapi = connection.dialect.loaded_dbapi
    try:
        return run(raw)
    except dbapi.Error as error:
        raise exc.DBAPIError.instance(sql, values, error, dbapi.Error,
                                      dialect=connection.dialect) from error


def _values(compiled: _Compiled, params: dict[str, Any]) -> list[Any]:
    constants = compiled.constants
    return [(params[name] if name in params else constants[name]) if process is None
            else process(params[name] if name in params else constants[name])
            for name, process in zip(compiled.names, compiled.bind, strict=True)]


def _compile(statement: Executable, dialect: Dialect) -> _Compiled:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    assert isinstance(compiled, SQLCompiler)
    if not compiled.positional or compiled.positiontup is None:
        raise ValueError(f"{dialect.name}: not a positional parameter style")
    if compiled.insert_prefetch or compiled.update_prefetch:
        raise ValueError("a column of this statement has a Python-side default: pass its value")
    binds = {compiled.bind_names[bind]: bind for bind in compiled.bind_names}
    names = tuple(compiled.positiontup)
    constants: dict[str, Any] = {}
    for name in names:
        bind = binds[name]
        if bind.expanding or bind.literal_execute or bind.callable is not None:
            raise ValueError(f"parameter {name}: expanding or computed values are not supported")
        if not bind.required:
            constants[name] = bind.value
    bind_processors = tuple(binds[name].type.dialect_impl(dialect).bind_processor(dialect)
                            for name in names)
    columns = list(getattr(statement, "exported_columns", []))
    results = tuple(column.type.dialect_impl(dialect).result_processor(dialect, None)
                    for column in columns)
    return _Compiled(compiled.string, names, bind_processors, constants, results)
