"""The webhook's authentication: ``X-Hub-Signature-256`` is ``sha256=`` and the hex HMAC-SHA256
of the raw body keyed with the webhook secret, compared in constant time before the body is
parsed. The legacy SHA-1 header is not accepted."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    """The header value GitHub sends for ``body``."""
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes | None, body: bytes, header: str | None) -> bool:
    """Whether ``header`` signs ``body`` with ``secret`` (no secret configured: never)."""
    if not secret or not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())
