"""The live event stream of an execution: Server-Sent Events read from the journal.

Each journal row becomes one SSE event: ``id:`` its ``seq``, ``event:`` its kind, ``data:`` the
row as JSON (``{seq, kind, cycle, data, created_at}``); a client that reconnects with
``Last-Event-ID: N`` gets the rows after ``N``, so nothing is missed or repeated. The loop's
``finished`` is not the end: the finalization steps follow (``finalize`` events: commit, push,
pull request, each with its result), and the stream ends with one ``end`` event, sent once the
execution's final status is committed, carrying it with ``branch``, ``head_sha``, ``pr_url``,
usage and cost (:func:`services.db.journal_reader.execution_end`); its id is the last row's, so
a resume after it gets the ``end`` again at once. A comment line every
:data:`~services.api.journal_hub.KEEPALIVE_S` keeps idle connections open through proxies.

All clients of one execution share one poller in this process (:mod:`services.api.journal_hub`).
"""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import StreamingResponse

from services.api.auth import Scope, requires
from services.api.deps import get_db
from services.api.errors import ERROR_RESPONSES, NOT_FOUND_RESPONSE, ApiError
from services.api.journal_hub import JournalHub
from services.api.teams import visible_execution
from services.db.executions import ExecutionRepository, UnknownExecution
from services.db.session import Database
from services.execution.errors import ErrorCode

router = APIRouter(prefix="/api/executions", tags=["executions"], responses=ERROR_RESPONSES)

_STREAM_RESPONSES: dict[int | str, dict[str, Any]] = {
    **NOT_FOUND_RESPONSE,
    200: {"content": {"text/event-stream": {"schema": {"type": "string"}}},
          "description": "The journal as Server-Sent Events, then the end event once the "
                         "execution's final status is committed."},
}


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
    request: Request,
    execution_id: str = Depends(visible_execution),  # noqa: B008
    last_event_id: Annotated[str | None, Header(max_length=64)] = None,
    db: Database = Depends(get_db),  # noqa: B008
) -> StreamingResponse:
    """The execution's journal as SSE; send ``Last-Event-ID`` to resume after an event."""
    after = _after(last_event_id)
    row = await anyio.to_thread.run_sync(ExecutionRepository(db).get, execution_id)
    if row is None:
        raise UnknownExecution(execution_id)
    hub: JournalHub = request.app.state.journal_hub
    return StreamingResponse(hub.follow(execution_id, after), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
