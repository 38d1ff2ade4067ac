"""Request ids and counts (every request gets a ``request_id`` and a ``correlation_id``), and the
security headers of every response (:class:`SecurityHeadersMiddleware`).

Both are also sent back as headers, and each response is counted for ``/metrics``.

A client may send ``X-Request-ID`` and ``X-Correlation-ID`` (kept when they are short printable
tokens); otherwise a uuid4 is made, and the correlation id defaults to the request id. A pure ASGI
middleware, so streamed responses (SSE) pass through untouched.
"""

from __future__ import annotations

import re
import uuid

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.telemetry import record, tracing

_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            text = value.decode("latin-1")
            return text if _SAFE_ID.match(text) else None
    return None


class RequestIdMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _header(scope, b"x-request-id") or str(uuid.uuid4())
        correlation_id = _header(scope, b"x-correlation-id") or request_id
        state = scope.setdefault("state", {})
        state["request_id"], state["correlation_id"] = request_id, correlation_id
        tracing.annotate({"studio.request_id": request_id, "studio.correlation_id": correlation_id})

        async def send_with_ids(message: Message) -> None:
            if message["type"] == "http.response.start":
                record.api_request(str(scope.get("method", "")), int(message["status"]))
                headers = list(message.get("headers", []))
                headers.append((b"x-request-id", request_id.encode()))
                headers.append((b"x-correlation-id", correlation_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_ids)


CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
)


class SecurityHeadersMiddleware:
    """Every response carries :data:`SECURITY_HEADERS`: a Content-Security-Policy that allows no
    inline script (nor style, nor any origin but this one), no MIME sniffing, no referrer, no
    framing. The pages render everything from a run as text; this is the second line."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []),
                                                  *SECURITY_HEADERS]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
