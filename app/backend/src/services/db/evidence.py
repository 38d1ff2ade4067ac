"""The ``tool_calls`` evidence row, written by the journal and by the idempotency store.

A row is keyed ``(execution_id, call_id)``. Whoever writes first creates it; later writers fill in
only what is still missing, so a recorded envelope is never overwritten (the idempotency contract).
Callers pass data that is already redacted; large strings of the arguments and the envelope are
stored once per execution (:mod:`services.db.blobs`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, Connection, Table, bindparam, case, func, select
from sqlalchemy.orm import Session

from services.db.base import utcnow
from services.db.blobs import externalize, extract, hydrate
from services.db.models import ToolCallRecord
from services.db.session import Database, dialect_insert, dialect_name
from services.db.statements import Statement


def _identity(call: dict[str, Any] | None, envelope: dict[str, Any] | None) -> dict[str, Any]:
    source = call or envelope or {}
    tool_name = str(source.get("tool_name", ""))
    domain = str(source.get("domain") or tool_name.partition("_")[0])
    operation = str(source.get("operation") or tool_name.partition("_")[2])
    return {"tool_name": tool_name, "domain": domain, "operation": operation}


ENVELOPE_COLUMNS = ("envelope", "ok", "error_code", "duration_ms", "request_id",
                    "correlation_id", "finished_at")


def _envelope_columns(envelope: dict[str, Any]) -> dict[str, Any]:
    error = envelope.get("error") if isinstance(envelope.get("error"), dict) else None
    ids = error if error is not None else envelope
    duration = envelope.get("duration_ms")
    return {
        "envelope": envelope,
        "ok": bool(envelope.get("ok")),
        "error_code": error.get("code") if error else None,
        "duration_ms": float(duration) if isinstance(duration, int | float) else None,
        "request_id": ids.get("request_id"),
        "correlation_id": ids.get("correlation_id"),
        "finished_at": utcnow(),
    }


def record_tool_call(
    session: Session | Connection,
    execution_id: str,
    call_id: str,
    *,
    call: dict[str, Any] | None = None,
    envelope: dict[str, Any] | None = None,
    cycle: int | None = None,
    provider: str | None = None,
    known_blobs: set[str] | None = None,
) -> None:
    """Create or complete the evidence row, in one ``INSERT ... ON CONFLICT DO UPDATE``: what
    the row already holds wins (the arguments, the identity, the cycle, the provider, and the
    envelope with its columns once set). ``known_blobs``: see
    :func:`~services.db.blobs.externalize`."""
    values: dict[str, Any] = dict.fromkeys(_COLUMNS)
    values.update({
        "execution_id": execution_id, "call_id": call_id, "created_at": utcnow(),
        "cycle": cycle, "provider": provider, **_identity(call, envelope),
    })
    if call is not None:
        values["args"] = externalize(session, execution_id, dict(call.get("args") or {}),
                                     known=known_blobs)
    if envelope is not None:
        values.update(_envelope_columns(envelope))
        values["envelope"] = externalize(session, execution_id, envelope, known=known_blobs)
    params = {f"p_{key}": value for key, value in values.items()}
    if isinstance(session, Connection):
        _statement(session).execute(session, params)
    else:
        session.execute(_upsert(session), params)


_COLUMNS = ("execution_id", "call_id", "created_at", "cycle", "provider", "tool_name", "domain",
            "operation", "args", *ENVELOPE_COLUMNS)
_UPSERTS: dict[str, Any] = {}
_STATEMENTS: dict[str, Statement] = {}


def _statement(connection: Connection) -> Statement:
    """The upsert of the connection's dialect as a :class:`Statement` (one per dialect)."""
    name = dialect_name(connection)
    found = _STATEMENTS.get(name)
    if found is None:
        found = _STATEMENTS[name] = Statement(_upsert(connection))
    return found


def _upsert(session: Session | Connection) -> Any:
    """The evidence upsert of the session's dialect, built once on the table (Core: no ORM
    step when run on a session either; parameters ``p_<column>``; ``None`` is SQL ``NULL``,
    for the JSON columns too)."""
    name = dialect_name(session)
    found = _UPSERTS.get(name)
    if found is not None:
        return found
    table: Table = ToolCallRecord.__table__  # type: ignore[assignment]
    nullable_json = JSON(none_as_null=True)
    statement = dialect_insert(session)(table).values({
        key: bindparam(f"p_{key}", type_=nullable_json if key in ("args", "envelope")
                       else table.c[key].type) for key in _COLUMNS})
    new = statement.excluded
    unnamed = table.c.tool_name == ""
    no_envelope = table.c.envelope.is_(None)
    found = statement.on_conflict_do_update(
        index_elements=["execution_id", "call_id"],
        set_={
            "args": func.coalesce(table.c.args, new.args),
            **{key: case((unnamed, new[key]), else_=table.c[key])
               for key in ("tool_name", "domain", "operation")},
            "cycle": func.coalesce(table.c.cycle, new.cycle),
            "provider": func.coalesce(func.nullif(table.c.provider, ""), new.provider),
            **{key: case((no_envelope, new[key]), else_=table.c[key])
               for key in ENVELOPE_COLUMNS if key != "envelope"},
            "envelope": func.coalesce(table.c.envelope, new.envelope),
        })
    _UPSERTS[name] = found
    return found


def repeats(first: dict[str, Any], envelope: dict[str, Any]) -> bool:
    """Whether recording ``envelope`` alone (no arguments, cycle or provider) changes nothing
    in a row that :func:`record_tool_call` just wrote with ``first`` (its keyword arguments): the
    row already holds that envelope (so its envelope columns, its time included, stay), a
    name (so its identity stays), a provider that is not ``""`` (``NULLIF`` would make it
    ``NULL``); its arguments, cycle and creation time stay whatever the second write holds."""
    return (first.get("envelope") is not None and first["envelope"] == envelope
            and _identity(first.get("call"), first["envelope"])["tool_name"] != ""
            and first.get("provider") != "")


def evidence_op(call_id: str, *, call: dict[str, Any] | None = None,
                envelope: dict[str, Any] | None = None, cycle: int | None = None,
                provider: str | None = None, blobs: dict[str, bytes]) -> dict[str, Any]:
    """What :func:`record_tool_call` writes, as one operation of the PostgreSQL commit function
    (``studio_journal_commit``, which applies the same first-writer-wins rules); large strings
    are added to ``blobs``."""
    op: dict[str, Any] = {"op": "evidence", "call_id": call_id, "cycle": cycle,
                          "provider": provider, **_identity(call, envelope)}
    if call is not None:
        op["args"] = extract(dict(call.get("args") or {}), blobs)
    if envelope is not None:
        columns = _envelope_columns(envelope)
        op.update({key: columns[key] for key in ("ok", "error_code", "duration_ms", "request_id",
                                                 "correlation_id")})
        op["envelope"] = extract(envelope, blobs)
    return op


_TOOL_CALLS: Table = ToolCallRecord.__table__  # type: ignore[assignment]
_ENVELOPE = select(_TOOL_CALLS.c.envelope).where(
    _TOOL_CALLS.c.execution_id == bindparam("p_execution_id"),
    _TOOL_CALLS.c.call_id == bindparam("p_call_id"))


def recorded_envelope(db: Database, execution_id: str, call_id: str) -> dict[str, Any] | None:
    """The recorded envelope of a tool call, or ``None`` when it has none (one Core read: a
    loop asks before every call)."""
    def read(connection: Connection) -> dict[str, Any] | None:
        envelope = connection.execute(_ENVELOPE, {"p_execution_id": execution_id,
                                                  "p_call_id": call_id}).scalar_one_or_none()
        if envelope is None:
            return None
        (envelope,) = hydrate(connection, execution_id, [envelope])
        return dict(envelope)

    return db.read("idempotency record read", read)


_CALL_IDS = select(_TOOL_CALLS.c.call_id).where(
    _TOOL_CALLS.c.execution_id == bindparam("p_execution_id"))


class RecordedCalls:
    """Which calls of an execution may hold a recorded envelope, so that a store asks the
    database only for those.

    The calls recorded before this process started are read once, on the first question about
    an execution (one statement; on a resume, the calls of the earlier attempts); the calls this
    process records are added as it records them. Any other call id cannot have a record: the
    execution's lease gives it to one process at a time, and the journal's fenced commit of the
    call's ``tool_call`` event, made just before the call runs, stops a process that lost it.
    So a new call costs no read, and a call seen before is read as it is stored."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._known: dict[str, set[str]] = {}

    def may_exist(self, execution_id: str, call_id: str) -> bool:
        known = self._known.get(execution_id)
        if known is None:
            known = self._known[execution_id] = self._db.read(
                "recorded calls read", lambda connection: {
                    str(found) for found in connection.execute(
                        _CALL_IDS, {"p_execution_id": execution_id}).scalars()})
        return call_id in known

    def add(self, execution_id: str, call_id: str) -> None:
        self._known.setdefault(execution_id, set()).add(call_id)
