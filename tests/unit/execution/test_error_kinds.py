"""The table of error codes by kind (``ERROR_KINDS``): every code has a kind, the docs show the
same table, an unknown code is never retried, and a provider's spend cap is its own kind."""

from __future__ import annotations

import re
from pathlib import Path

from services.execution.errors import ERROR_KINDS, ErrorCode, ErrorKind, error_kind
from services.execution.providers.failures import from_status

DOCS = Path(__file__).resolve().parents[3] / "docs" / "sphinx" / "fault_tolerance.rst"


def _without_kind(table: dict[ErrorCode, ErrorKind]) -> list[str]:
    return [code.value for code in ErrorCode if code not in table]


def test_every_code_has_a_kind() -> None:
    assert _without_kind(ERROR_KINDS) == []


def test_the_check_finds_a_code_without_a_kind() -> None:
    partial = dict(ERROR_KINDS)
    del partial[ErrorCode.PROVIDER_UNAVAILABLE]
    assert _without_kind(partial) == ["provider_unavailable"]


def _documented() -> dict[str, str]:
    """``code -> kind`` from the table in fault_tolerance.rst."""
    text = DOCS.read_text()
    found: dict[str, str] = {}
    for kind, codes in re.findall(r"\* - ``(\w+)``\n     - (.+)", text):
        for code in re.findall(r"``(\w+)``", codes):
            found[code] = kind
    return found


def test_the_docs_show_the_same_table() -> None:
    documented = _documented()
    assert documented == {code.value: kind.value for code, kind in ERROR_KINDS.items()}
    assert documented["provider_unavailable"] == "infrastructure"  # the parse found the rows


def test_the_issues_examples_have_their_kinds() -> None:
    infrastructure = ("provider_unavailable", "mcp_server_failed", "mcp_server_crashed",
                      "integration_unavailable", "substrate_error")
    permanent = ("invalid_arguments", "path_outside_workspace", "budget_exceeded",
                 "auth_failed", "max_iterations_exceeded", "permission_denied",
                 "provider_rejected", "config_error")
    assert {error_kind(c) for c in infrastructure} == {ErrorKind.INFRASTRUCTURE}
    assert {error_kind(c) for c in permanent} == {ErrorKind.PERMANENT}
    assert error_kind("spend_cap_reached") is ErrorKind.PROVIDER_LIMIT


def test_an_unknown_or_missing_code_is_permanent() -> None:
    for code in ("no_such_code_from_a_newer_release", "", None, "x" * 500):
        assert error_kind(code) is ErrorKind.PERMANENT


def test_a_spend_cap_is_a_provider_limit_and_a_rate_limit_is_infrastructure() -> None:
    capped = from_status("codex", 429, "You exceeded your current quota (insufficient_quota)")
    assert capped.code is ErrorCode.SPEND_CAP_REACHED and capped.retryable is False
    forbidden = from_status("claude", 403, "Your spending limit has been reached")
    assert forbidden.code is ErrorCode.SPEND_CAP_REACHED
    limited = from_status("codex", 429, "Rate limit reached", headers={"retry-after": "7"})
    assert limited.code is ErrorCode.PROVIDER_UNAVAILABLE and limited.retryable is True
    assert limited.details["retry_after"] == 7.0
    assert from_status("codex", 403, "forbidden").code is ErrorCode.PROVIDER_REJECTED
