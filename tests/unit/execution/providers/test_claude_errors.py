"""Claude Code CLI failures mapped to ProviderUnavailable / ProviderRejected."""

from __future__ import annotations

from typing import Any

import pytest
from claude_agent_sdk import CLIConnectionError, ResultError, ResultMessage

from services.execution.errors import (
    ErrorCode,
    ProviderError,
    ProviderRejected,
    ProviderUnavailable,
)
from services.execution.providers.claude_errors import api_error, session_error


def result(**fields: Any) -> ResultMessage:
    base: dict[str, Any] = dict(subtype="success", duration_ms=1, duration_api_ms=1,
                                is_error=False, num_turns=1, session_id="s")
    base.update(fields)
    return ResultMessage(**base)


@pytest.mark.parametrize(("status", "kind"), [
    (429, ProviderUnavailable), (500, ProviderUnavailable), (529, ProviderUnavailable),
    (424, ProviderUnavailable), (400, ProviderRejected), (401, ProviderRejected),
    (403, ProviderRejected),
])
def test_status_of_a_failed_result(status: int, kind: type[ProviderError]) -> None:
    error = api_error(result(is_error=True, api_error_status=status,
                             result=f"API Error: {status}"), None)
    assert type(error) is kind
    assert error.details["status"] == status and error.retryable is False
    assert f"API Error: {status}" in error.message


def test_assistant_error_kinds_without_a_status() -> None:
    failed = result(is_error=True, errors=["boom"])
    assert isinstance(api_error(failed, "rate_limit"), ProviderUnavailable)
    assert isinstance(api_error(failed, "authentication_failed"), ProviderRejected)
    unknown = api_error(failed, "unknown")
    assert type(unknown) is ProviderError and unknown.code is ErrorCode.PROVIDER_UNAVAILABLE


def test_a_recovered_or_clean_session_carries_no_error() -> None:
    assert api_error(result(), "rate_limit") is None  # a later retry succeeded
    assert api_error(result(), None) is None
    assert api_error(None, None) is None


def test_sdk_exceptions() -> None:
    failed = ResultError("exit 1", {"subtype": "success", "api_error_status": 503,
                                    "errors": ["overloaded"]}, exit_code=1)
    mapped = session_error(failed)
    assert isinstance(mapped, ProviderUnavailable) and mapped.details["status"] == 503
    assert mapped.__cause__ is failed
    died = session_error(CLIConnectionError("gone"))
    assert isinstance(died, ProviderUnavailable) and died.retryable is False
