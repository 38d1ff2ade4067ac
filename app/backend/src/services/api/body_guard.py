"""Authentication before the body, and a cap on the body's size.

A pure ASGI middleware in front of every ``/api/`` request that may carry a body (any method but
``GET``, ``HEAD`` and ``OPTIONS``): the bearer token is verified first, so an unauthenticated
caller gets ``unauthorized`` (401) before one byte of its body is read or parsed; then the body
is read up to ``STUDIO_API_MAX_BODY_BYTES`` (default 4 MiB) and handed on whole. A body over the
cap, declared by ``Content-Length`` or found while reading, is ``request_too_large`` (413): the
API never holds more than the cap of one request's body in memory. Scopes are still checked per
route (:mod:`services.api.auth`), with the identity verified here.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.auth import authenticate
from services.api.errors import ApiError, error_response
from services.execution.errors import ErrorCode

NO_BODY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Webhooks carry a signature instead of a token, and a cap of their own
# (services.api.routers.webhooks).
SIGNED_PREFIX = "/api/webhooks/"


class _TooLarge(Exception):
    pass


class BodyGuardMiddleware:
    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or not str(scope["path"]).startswith("/api/")
                or scope["method"] in NO_BODY_METHODS
                or str(scope["path"]).startswith(SIGNED_PREFIX)):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            await authenticate(request)
            if _declared_length(scope) > self.max_body_bytes:
                raise _TooLarge
            body = await self._read(receive)
        except ApiError as exc:
            await error_response(request, 401, exc.code, exc.message,
                                 headers={"WWW-Authenticate": "Bearer"})(scope, receive, send)
            return
        except _TooLarge:
            await error_response(
                request, 413, ErrorCode.REQUEST_TOO_LARGE,
                f"the request body is over {self.max_body_bytes} bytes",
                details={"max_body_bytes": self.max_body_bytes})(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return b"".join(chunks)  # the client went away
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self.max_body_bytes:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _declared_length(scope: Scope) -> int:
    for key, value in scope.get("headers", []):
        if key.lower() == b"content-length":
            try:
                return int(value)
            except ValueError:
                return 0  # the server refuses a malformed length itself
    return 0


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # a disconnect, for streaming responses

    return replay
