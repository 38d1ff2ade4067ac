"""Core statements run on the driver's own cursor: :class:`Statement` and :func:`driver_sql`.

A loop's journal runs the same statements every step: on SQLite a dozen (the sequence counter,
the events, the evidence row, the charges, the read before the next call), on PostgreSQL the
commit function's call and the read before a tool call. SQLAlchemy executes a compiled, cached
Core statement through an execution context, parameter processing, events and a result object:
about a hundred Python calls each, several times the statement's own cost on SQLite, as much as
the driver's own on PostgreSQL. A :class:`Statement` is the same Core statement compiled once per
dialect; it binds the parameters through the same bind processors (the column types': dates,
JSON, ...), runs the SQL text on the DBAPI connection inside the SQLAlchemy connection's
transaction (the same connection, so the same transaction, or autocommit), and turns the rows it
returns into values through the same result processors, chosen as SQLAlchemy chooses them (from
the column types and the cursor's description). The same SQL with the same values, the same
values back (``tests/integration/db/test_statements.py`` compares both ways on each statement,
on SQLite and on PostgreSQL). :func:`driver_sql` does the same for a fixed SQL text (a
``BEGIN IMMEDIATE``, the journal's function call).

The drivers: SQLite's ``sqlite3`` (positional ``?``: the values in order) and ``psycopg``
(named ``%(name)s``: the values by name; psycopg prepares a statement on the server after a few
executions, as it does under SQLAlchemy). Executed through Core instead: on any other driver;
when something listens to the connection's statements (``before_cursor_execute`` or
``after_cursor_execute``: the statement spans of tracing, a test that counts statements) or to
its errors (``handle_error``), so that it sees them all. A database error is raised as
SQLAlchemy raises it (:meth:`sqlalchemy.exc.DBAPIError.instance`); one that means the
connection is gone (the dialect's ``is_disconnect``) also invalidates the connection, as
SQLAlchemy does, so that it is not given back to the pool and the error reads as
``connection_invalidated`` (:mod:`services.db.connection_loss` runs the work again). A statement
whose columns get Python-side defaults (``default=`` / ``onupdate=``) is refused when compiled:
its caller passes those values.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, exc
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.base import Executable
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any] | None
DRIVERS = frozenset({("sqlite", "pysqlite"), ("postgresql", "psycopg")})
"""The (dialect, driver) pairs whose statements may run on the cursor."""


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
    names: tuple[str, ...]  # the parameter of each placeholder (positional) or each name
    keys: tuple[str, ...] | None  # named styles: the placeholder's name for each of ``names``
    bind: tuple[Processor, ...]
    constants: dict[str, Any]  # values the statement carries itself
    types: tuple[Any, ...]  # the result columns' types (their dialect's processors)
    dml: bool  # an INSERT, UPDATE or DELETE (its rowcount is read)
    # the result processors, from the cursor's type codes (as SQLAlchemy picks them)
    results: list[tuple[Processor, ...]] = field(default_factory=list)


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
        cursor = _run(connection, compiled.sql, lambda raw: _execute(raw, compiled.sql, values),
                      values)
        try:
            # as SQLAlchemy reads it: a DML statement's before its rows are fetched; a query's
            # once they are (-1 with both drivers)
            rowcount = cursor.rowcount if compiled.dml else -1
            description = cursor.description
            rows = cursor.fetchall() if description is not None else []
        finally:
            cursor.close()
        if rows:
            processors = (compiled.results[0] if compiled.results
                          else _result_processors(compiled, connection.dialect, description))
            if any(processors):
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

        def run(raw: Any) -> Any:
            if connection.dialect.name == "sqlite":
                return raw.executemany(compiled.sql, values)
            cursor = raw.cursor()
            cursor.executemany(compiled.sql, values)
            return cursor

        _run(connection, compiled.sql, run, values).close()

    def _compile(self, dialect: Dialect) -> _Compiled:
        found = self._compiled.get(dialect)
        if found is None:
            found = self._compiled[dialect] = _compile(self.statement, dialect)
            self.compilations += 1
        return found


def direct(connection: Connection) -> bool:
    """Whether statements on ``connection`` may go straight to its cursor: a driver of
    :data:`DRIVERS`, and nobody listening to its statements or their errors."""
    dialect = connection.dialect
    if (dialect.name, dialect.driver) not in DRIVERS:
        return False
    dispatch = connection.dispatch
    return not (dispatch.before_cursor_execute or dispatch.after_cursor_execute
                or dialect.dispatch.handle_error)


def driver_sql(connection: Connection, sql: str,
               params: dict[str, Any] | None = None) -> tuple[Any, ...] | None:
    """``sql`` (a fixed text in the driver's own parameter style, ``params`` by name) on the
    cursor where :func:`direct` allows it, else through ``exec_driver_sql``; answers its first
    row (``None``: no rows)."""
    if not direct(connection):
        result = (connection.exec_driver_sql(sql, params) if params is not None
                  else connection.exec_driver_sql(sql))
        row = result.first() if result.returns_rows else None
        return tuple(row) if row is not None else None
    cursor = _run(connection, sql, lambda raw: _execute(raw, sql, params), params)
    try:
        return cursor.fetchone() if cursor.description is not None else None
    finally:
        cursor.close()


def execute_sql(connection: Connection, sql: str) -> None:
    """``sql`` (a fixed statement without parameters: ``BEGIN IMMEDIATE``)."""
    driver_sql(connection, sql)


def _execute(raw: Any, sql: str, values: Any) -> Any:
    """``sql`` on a new cursor of ``raw`` (both drivers' ``Connection.execute``)."""
    return raw.execute(sql) if values is None else raw.execute(sql, values)


def _run(connection: Connection, sql: str, run: Callable[[Any], Any], values: Any) -> Any:
    raw = connection.connection.dbapi_connection
    dialect = connection.dialect
    dbapi = dialect.loaded_dbapi
    try:
        return run(raw)
    except dbapi.Error as error:
        lost = bool(dialect.is_disconnect(error, raw, None))
        if lost:
            connection.invalidate(error)
        raise exc.DBAPIError.instance(sql, values, error, dbapi.Error,
                                      connection_invalidated=lost, dialect=dialect) from error


def _values(compiled: _Compiled, params: dict[str, Any]) -> Any:
    constants = compiled.constants
    values = [(params[name] if name in params else constants[name]) if process is None
              else process(params[name] if name in params else constants[name])
              for name, process in zip(compiled.names, compiled.bind, strict=True)]
    if compiled.keys is None:
        return values
    return dict(zip(compiled.keys, values, strict=True))


def _result_processors(compiled: _Compiled, dialect: Dialect,
                       description: Sequence[Any]) -> tuple[Processor, ...]:
    """Chosen at the first rows (a statement's columns keep their types); two threads that
    both choose them append the same tuple, and the first is used."""
    compiled.results.append(tuple(
        kind.dialect_impl(dialect).result_processor(dialect, column[1])
        for kind, column in zip(compiled.types, description, strict=True)))
    return compiled.results[0]


def _compile(statement: Executable, dialect: Dialect) -> _Compiled:
    compiled = statement.compile(dialect=dialect)  # type: ignore[attr-defined]
    assert isinstance(compiled, SQLCompiler)
    if compiled.insert_prefetch or compiled.update_prefetch:
        raise ValueError("a column of this statement has a Python-side default: pass its value")
    binds = {compiled.bind_names[bind]: bind for bind in compiled.bind_names}
    if compiled.positional:
        if compiled.positiontup is None:
            raise ValueError(f"{dialect.name}: no parameter order")
        names = tuple(compiled.positiontup)
        keys = None
    else:
        if dialect.paramstyle != "pyformat":
            raise ValueError(f"{dialect.name}: not a supported parameter style")
        names = tuple(binds)
        escaped: dict[str, str] = dict(compiled.escaped_bind_names or {})
        keys = tuple(escaped.get(name, name) for name in names)
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
    return _Compiled(compiled.string, names, keys, bind_processors, constants,
                     tuple(column.type for column in columns),
                     bool(compiled.isinsert or compiled.isupdate or compiled.isdelete))
