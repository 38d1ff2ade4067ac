"""``POST /api/webhooks/github``: GitHub's deliveries. The signature is the authentication (no
bearer token; :mod:`services.triggers.ingress` checks it before anything is parsed or stored).

The body is read here, up to ``STUDIO_WEBHOOK_MAX_BODY_BYTES`` (default 1 MiB; past it 413
``request_too_large``, nothing stored). What the delivery asks for is handed on at once: to a
worker with a broker, else acted on in this process in the background; the answer never waits
for GitHub or a run.
"""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, BackgroundTasks, Request
from fastapi.responses import JSONResponse, Response

from services.api.errors import error_response
from services.db.session import Database
from services.execution.errors import ErrorCode
from services.settings import StudioSettings
from services.triggers.ingress import receive
from services.triggers.processing import process_delivery

router = APIRouter(prefix="/api/webhooks", tags=["webhooks"])
MESSAGES = {401: "the delivery's X-Hub-Signature-256 is missing or wrong",
            400: "the delivery is malformed (headers or JSON body)"}


class _TooLarge(Exception):
    pass


async def _body(request: Request, cap: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise _TooLarge
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            raise _TooLarge
        chunks.append(chunk)
    return b"".join(chunks)


@router.post("/github", status_code=202, include_in_schema=True,
             responses={200: {"description": "ping, or a delivery seen before"},
                        400: {"description": "malformed"}, 401: {"description": "bad signature"},
                        413: {"description": "body too large"}})
async def github_delivery(request: Request, background: BackgroundTasks) -> Response:
    """One GitHub webhook delivery (signed with the integration's webhook secret)."""
    db: Database = request.app.state.db
    settings: StudioSettings = request.app.state.settings
    cap = settings.webhook_max_body_bytes
    try:
        body = await _body(request, cap)
    except _TooLarge:
        return error_response(request, 413, ErrorCode.REQUEST_TOO_LARGE,
                              f"the delivery is over {cap} bytes",
                              details={"max_body_bytes": cap})
    headers = {name.lower(): value for name, value in request.headers.items()}
    answer = await anyio.to_thread.run_sync(receive, db, settings, headers, body)
    if answer.code is not None:
        code = ErrorCode.UNAUTHORIZED if answer.status == 401 else ErrorCode.INVALID_ARGUMENTS
        return error_response(request, answer.status, code, MESSAGES[answer.status],
                              details={k: v for k, v in answer.body.items() if k != "ok"})
    if answer.enqueue is not None:
        dispatch = request.app.state.dispatch
        if dispatch.delivery is not None:
            await anyio.to_thread.run_sync(dispatch.delivery, answer.enqueue)
        else:
            background.add_task(anyio.to_thread.run_sync, process_delivery, db, settings,
                                answer.enqueue, request.app.state.launcher.launch)
    return JSONResponse(answer.body, status_code=answer.status)
