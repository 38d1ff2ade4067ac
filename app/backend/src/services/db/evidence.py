"""The ``tool_calls`` evidence row, written by the journal and by the idempotency store.

A row is keyed ``(execution_id, call_id)``. Whoever writes first creates it; later writers fill in
only what is still missing, so a recorded envelope is never overwritten (the idempotency contract).
Callers pass data that is already redacted; large strings of the arguments and the envelope are
stored once per execution (:mod:`services.db.blobs`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from services.db.base import utcnow
from services.db.blobs import externalize, extract
from services.db.models import ToolCallRecord
from services.db.session import dialect_insert


def _identity(call: dict[str, Any] | None, envelope: dict[str, Any] | None) -> dict[str, Any]:
    source = call or envelope or {}
    tool_name = str(source.get("tool_name", ""))
    domain = str(source.get("domain") or tool_name.partition("_")[0])
    operation = str(source.get("operation") or tool_name.partition("_")[2])
    return {"tool_name": tool_name, "domain": domain, "operation": operation}


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


def _insert_missing(session: Session, values: dict[str, Any]) -> None:
    statement = dialect_insert(session)(ToolCallRecord).values(**values).on_conflict_do_nothing(
        index_elements=["execution_id", "call_id"]
    )
    session.execute(statement)


def record_tool_call(
    session: Session,
    execution_id: str,
    call_id: str,
    *,
    call: dict[str, Any] | None = None,
    envelope: dict[str, Any] | None = None,
    cycle: int | None = None,
    provider: str | None = None,
) -> bool:
    """Create or complete the evidence row; answers whether ``envelope`` was stored by this call."""
    _insert_missing(session, {
        "execution_id": execution_id, "call_id": call_id, "created_at": utcnow(),
        **_identity(call, envelope),
    })
    row = session.execute(
        select(ToolCallRecord)
        .where(ToolCallRecord.execution_id == execution_id, ToolCallRecord.call_id == call_id)
        .with_for_update()
    ).scalar_one()
    if call is not None and row.args is None:
        row.args = externalize(session, execution_id, dict(call.get("args") or {}))
    if not row.tool_name:
        for key, value in _identity(call, envelope).items():
            setattr(row, key, value)
    row.cycle = row.cycle if row.cycle is not None else cycle
    row.provider = row.provider or provider
    if envelope is None or row.envelope is not None:
        return False
    for key, value in _envelope_columns(envelope).items():
        setattr(row, key, value)
    row.envelope = externalize(session, execution_id, envelope)
    return True


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
