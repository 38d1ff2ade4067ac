"""Provider errors in the engine's terms: retryable ``ProviderUnavailable`` or ``ProviderRejected``.

Shared by the adapters; each one extracts the status, message and headers from its SDK's
exception classes and calls :func:`from_status`.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from typing import Any

from services.execution.errors import (
    ErrorCode,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)

RETRYABLE_STATUSES = frozenset({408, 424, 429})  # plus every 5xx
# A 429 or 403 saying the account's spend cap or quota is reached (F9): not a rate limit that
# passes, a provider limit an operator lifts (``spend_cap_reached``, never retried).
SPEND_CAP = re.compile(r"insufficient_quota|spend(ing)?[ _-]?(cap|limit)|billing|quota exceeded",
                       re.IGNORECASE)
_MAX_MESSAGE = 500
# How the vendors say a request is longer than the model's window (OpenAI
# ``context_length_exceeded``, Anthropic "prompt is too long", Gemini "exceeds the maximum
# number of tokens"): such a 400 is ``context_exhausted``, not a raw rejection.
_CONTEXT_PATTERN = re.compile(
    r"context[_ ]length|context window|prompt is too long|maximum (?:number of )?tokens|"
    r"too many (?:input )?tokens", re.IGNORECASE)


def is_retryable(status: int) -> bool:
    return status in RETRYABLE_STATUSES or status >= 500


def retry_after_seconds(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``Retry-After`` (seconds or an HTTP date) or ``retry-after-ms``."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = lowered.get("retry-after-ms")
    if millis is not None:
        try:
            return max(float(millis) / 1000.0, 0.0)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(float(value), 0.0)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value.strip() else None
        return None if when is None else max(when.timestamp() - time.time(), 0.0)


def redact(text: str, secrets: tuple[str | None, ...]) -> str:
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "[REDACTED]")
    return text[:_MAX_MESSAGE]


def from_status(
    provider: str, status: int, message: str, *, headers: Mapping[str, str] | None = None,
    secrets: tuple[str | None, ...] = (), extra: dict[str, Any] | None = None,
) -> ProviderError:
    """The engine error for an HTTP error answer of a provider."""
    text = f"{provider}: HTTP {status}: {redact(message, secrets)}"
    details: dict[str, Any] = {"provider": provider, "status": status, **(extra or {})}
    if status in (403, 429) and SPEND_CAP.search(message):
        return ProviderRejected(text, code=ErrorCode.SPEND_CAP_REACHED, details=details)
    if is_retryable(status):
        wait = retry_after_seconds(headers)
        if wait is not None:
            details["retry_after"] = wait
        return ProviderUnavailable(text, details=details)
    if status in (400, 413) and _CONTEXT_PATTERN.search(message):
        return ProviderRejected(f"{provider}: the request does not fit the model's context "
                                f"window: {redact(message, secrets)}", details=details,
                                code=ErrorCode.CONTEXT_EXHAUSTED)
    return ProviderRejected(text, details=details)


def unavailable(provider: str, reason: str, message: str) -> ProviderUnavailable:
    """A connection failure, a timeout or an unreadable answer (all retryable)."""
    return ProviderUnavailable(
        f"{provider}: {reason}: {message[:_MAX_MESSAGE]}",
        details={"provider": provider, "reason": reason},
    )
