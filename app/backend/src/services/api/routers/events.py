"""The live event stream of an execution: Server-Sent Events read from the journal.

Each journal row becomes one SSE event: ``id:`` its ``seq``, ``event:`` its kind, ``data:`` the
row as JSON (``{seq, kind, cycle, data, created_at}``). The journal is polled every
:data:`POLL_INTERVAL_S`; a client that reconnects with ``Last-Event-ID: N`` gets the rows after
``N``, so nothing is missed or repeated. The stream ends right after the ``finished`` event (and,
for an execution that ended without writing one, once it has been final for
:data:`FINAL_GRACE_S` with nothing new). A comment line every :data:`KEEPALIVE_S` keeps idle
connections open through proxies.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Header
from fastapi.responses import StreamingResponse

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.routers.executions import ExecutionId
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.models import ExecutionEvent
from services.db.session import Database
from services.db.status import FINAL_STATUSES
from services.execution.errors import ErrorCode
from services.execution.ports import AgentEventKind

router = APIRouter(prefix="/api/executions", tags=["executions"], responses=ERROR_RESPONSES)

POLL_INTERVAL_S = 0.2
KEEPALIVE_S = 15.0
FINAL_GRACE_S = 5.0
FINISHED = AgentEventKind.FINISHED.value

_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND_RESPONSE,
    200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
          "description": "The journal as Server-Sent Events, until the finished event."},
}


def format_event(row: ExecutionEvent) -> str:
    """One SSE event for a journal row."""
    created = row.created_at.isoformat() if row.created_at is not None else None
    data = json.dumps({"seq": row.seq, "kind": row.kind, "cycle": row.cycle, "data": row.data,
                       "created_at": created}, separators=(",", ":"), default=str)
    return f"id: {row.seq}\nevent: {row.kind}\ndata: {data}\n\n"


class JournalStream:
    """Polls the journal of one execution from ``after`` on."""

    def __init__(self, db: Database, execution_id: str, after: int) -> None:
        self.repository = ExecutionRepository(db)
        self.execution_id = execution_id
        self.last = after

    async def _read(self) -> list[ExecutionEvent]:
        return await anyio.to_thread.run_sync(
            lambda: self.repository.events(self.execution_id, after_seq=self.last))

    async def _is_final(self) -> bool:
        row = await anyio.to_thread.run_sync(self.repository.get, self.execution_id)
        return row is None or row.status in FINAL_STATUSES

    async def _already_finished(self) -> bool:
        if self.last <= 0:
            return False
        rows = await anyio.to_thread.run_sync(
            lambda: self.repository.events(self.execution_id, after_seq=self.last - 1))
        return bool(rows) and rows[0].seq == self.last and rows[0].kind == FINISHED

    async def stream(self) -> AsyncIterator[str]:
        if await self._already_finished():
            return
        quiet_since = last_sent = time.monotonic()
        while True:
            rows = await self._read()
            for row in rows:
                yield format_event(row)
                self.last = row.seq
                if row.kind == FINISHED:
                    return
            now = time.monotonic()
            if rows:
                quiet_since = last_sent = now
            elif await self._is_final():
                if now - quiet_since >= FINAL_GRACE_S:
                    return
            else:
                quiet_since = now
            if now - last_sent >= KEEPALIVE_S:
                yield ": keep-alive\n\n"
                last_sent = now
            await anyio.sleep(POLL_INTERVAL_S)


def _after(last_event_id: str | None) -> int:
    if last_event_id is None or last_event_id.strip() == "":
        return 0
    text = last_event_id.strip()
    if not text.isdigit() or len(text) > 12:
        raise ApiError("Last-Event-ID must be an event id (a non-negative integer)",
                       code=ErrorCode.INVALID_ARGUMENTS, details={"header": "Last-Event-ID"})
    return int(text)


@router.get("/{execution_id}/events", response_class=StreamingResponse,
            responses=_STREAM_RESPONSES, dependencies=[requires(Scope.READ)])
async def stream_events(
    execution_id: ExecutionId,
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
    db: Database = Depends(get_db),  # noqa: B008
) -> StreamingResponse:
    """The execution's journal as SSE; send ``Last-Event-ID`` to resume after an event."""
    after = _after(last_event_id)
    row = await anyio.to_thread.run_sync(ExecutionRepository(db).get, execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    stream = JournalStream(db, execution_id, after)
    return StreamingResponse(stream.stream(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
