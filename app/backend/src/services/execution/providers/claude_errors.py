"""Claude Code CLI failures translated into the engine's provider errors.

The CLI reports an API failure it gave up on in three places: the result message (``is_error``
with ``api_error_status``), the assistant message's ``error`` kind, or, when the CLI exits after a
failed result, the SDK's ``ResultError``. Rate limits, 5xx, 529 (overloaded) and 424 become
:class:`ProviderUnavailable`; other 4xx, authentication and billing failures
:class:`ProviderRejected`. Every one is ``retryable=False``: the CLI has already spent its own
bounded retries (``CLAUDE_CODE_MAX_RETRIES``), and the loop must not nest retries over them.
"""

from __future__ import annotations

from claude_agent_sdk import ClaudeSDKError, ResultError, ResultMessage

from services.execution.errors import ProviderError, ProviderRejected, ProviderUnavailable

_UNAVAILABLE_KINDS = frozenset({"rate_limit", "server_error"})
_REJECTED_KINDS = frozenset({"authentication_failed", "billing_error", "invalid_request"})


def is_unavailable_status(status: int) -> bool:
    """429, 424, 5xx (529 included): the provider may answer later."""
    return status in (424, 429) or status >= 500


def status_error(status: int, message: str) -> ProviderError:
    """The provider error for an HTTP status the CLI reported."""
    details = {"status": status, "provider": "claude"}
    if is_unavailable_status(status):
        return ProviderUnavailable(message, details=details, retryable=False)
    return ProviderRejected(message, details=details)


def _describe(result: ResultMessage | None, fallback: str) -> str:
    if result is not None:
        if result.errors:
            return "; ".join(result.errors)[:500]
        if isinstance(result.result, str) and result.result:
            return result.result[:500]
    return fallback


def api_error(result: ResultMessage | None, assistant_error: str | None) -> ProviderError | None:
    """The provider error a finished session carries, or ``None`` when it carries none."""
    status = result.api_error_status if result is not None else None
    if result is not None and result.is_error and status is not None:
        return status_error(status, _describe(result, f"Claude API error {status}"))
    if assistant_error is None:
        return None
    if result is not None and not result.is_error:
        return None  # the CLI recovered (a retry succeeded)
    message = _describe(result, f"Claude API error: {assistant_error}")
    details = {"kind": assistant_error, "provider": "claude"}
    if assistant_error in _UNAVAILABLE_KINDS:
        return ProviderUnavailable(message, details=details, retryable=False)
    if assistant_error in _REJECTED_KINDS:
        return ProviderRejected(message, details=details)
    return ProviderError(message, details=details)


def session_error(exc: ClaudeSDKError) -> ProviderError:
    """An SDK exception (the CLI died, exited after a failed result, spoke garbage)."""
    if isinstance(exc, ResultError) and exc.api_error_status is not None:
        error = status_error(exc.api_error_status, "; ".join(exc.errors) or str(exc))
    else:
        error = ProviderUnavailable(
            f"the Claude Code CLI failed: {exc}",
            details={"provider": "claude", "sdk_error": type(exc).__name__},
            retryable=False,
        )
    error.__cause__ = exc
    return error
