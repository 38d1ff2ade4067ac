"""The event journal: a :class:`~services.execution.ports.EventSink` writing ``execution_events``.

Every event is one committed transaction, so a cycle is durable before the next model call.
Sequence numbers come from the execution's own counter (``node_executions.event_seq``), bumped by
an ``UPDATE ... RETURNING`` in the same transaction as the insert: the row lock (PostgreSQL) or
the database write lock (SQLite, ``BEGIN IMMEDIATE``) serializes writers of one execution, and a
transaction that dies (even by SIGKILL) takes its number with it, so ``seq`` runs 1, 2, 3, ...
without gaps. The ``(execution_id, seq)`` primary key backs this up.

``tool_call`` and ``tool_result`` events also write the ``tool_calls`` evidence row. Event data is
redacted before it is stored (by default with ``Redactor.from_settings(get_settings())``).
When a lease epoch is given, a write from a process whose epoch is no longer the execution's
raises :class:`StaleLease` and writes nothing.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session

from services.db.evidence import record_tool_call
from services.db.executions import UnknownExecution
from services.db.models import ExecutionEvent, NodeExecution
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.errors import ExecutionError
from services.execution.ports import AgentEvent, AgentEventKind
from services.settings import get_settings


class StaleLease(ExecutionError):
    """This process no longer holds the execution's lease: it must stop writing."""


class DbEventSink:
    def __init__(
        self, db: Database, redactor: Redactor | None = None, *, lease_epoch: int | None = None
    ) -> None:
        self._db = db
        self._redactor = redactor or Redactor.from_settings(get_settings())
        self._lease_epoch = lease_epoch

    def emit(self, event: AgentEvent) -> None:
        self.append(event)

    def append(self, event: AgentEvent) -> int:
        """Write ``event``; answers its sequence number."""
        data: dict[str, Any] = self._redactor.data(dict(event.data))
        with self._db.session() as session:
            seq = self._next_seq(session, event.execution_id)
            session.add(ExecutionEvent(
                execution_id=event.execution_id, seq=seq, kind=event.kind.value,
                cycle=event.cycle, data=data,
            ))
            if event.kind in (AgentEventKind.TOOL_CALL, AgentEventKind.TOOL_RESULT):
                _record_evidence(session, event, data)
        return seq

    def _next_seq(self, session: Session, execution_id: str) -> int:
        statement = (
            update(NodeExecution)
            .where(NodeExecution.id == execution_id)
            .values(event_seq=NodeExecution.event_seq + 1)
            .returning(NodeExecution.event_seq, NodeExecution.lease_epoch)
        )
        row = session.execute(statement).one_or_none()
        if row is None:
            raise UnknownExecution(execution_id)
        seq, epoch = row
        if self._lease_epoch is not None and epoch != self._lease_epoch:
            raise StaleLease(
                f"lease epoch {self._lease_epoch} is stale (now {epoch})",
                details={"execution_id": execution_id},
            )
        return int(seq)


def _record_evidence(session: Session, event: AgentEvent, data: dict[str, Any]) -> None:
    call = data.get("call") if isinstance(data.get("call"), dict) else None
    envelope = data.get("envelope") if isinstance(data.get("envelope"), dict) else None
    call_id = (call or envelope or {}).get("call_id")
    if not call_id:
        return
    provider = data.get("provider")
    record_tool_call(
        session, event.execution_id, str(call_id), call=call,
        envelope=envelope if event.kind is AgentEventKind.TOOL_RESULT else None,
        cycle=int(data.get("cycle", event.cycle)),
        provider=str(provider) if provider is not None else None,
    )
