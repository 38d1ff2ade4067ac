"""The host rules of stored HTTP MCP servers at run time (the pin a connection is made to) and
how a stored URL is answered; the resolver is injected (no DNS in a unit test)."""

from __future__ import annotations

import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.mcp.config import shown_url, stored_url_problem
from services.repos.hosts import HostPolicy
from services.runs.mcp_confinement import _check_connect


def _policy(*answers: str, allowed: tuple[str, ...] = ()) -> HostPolicy:
    import ipaddress

    return HostPolicy(allowed_networks=tuple(ipaddress.ip_network(a) for a in allowed),
                      resolver=lambda host: list(answers))


def test_a_public_name_is_pinned_to_every_checked_address_ipv6_included() -> None:
    policy = _policy("2606:4700:4700::1111", "1.1.1.1")
    assert _check_connect(policy, "https://mcp.example.com/mcp") == [
        "2606:4700:4700::1111", "1.1.1.1"]


def test_a_literal_address_needs_no_pin() -> None:
    assert _check_connect(_policy(), "https://1.1.1.1/mcp") is None


@pytest.mark.parametrize(("answers", "url"), [
    (("169.254.169.254",), "http://rebinds.example.com/latest/meta-data/"),
    (("1.1.1.1", "10.0.0.5"), "https://half-internal.example.com/mcp"),
    (("::ffff:127.0.0.1",), "https://mapped.example.com/mcp"),
    ((), "http://[fd00::1]/mcp"),
    ((), "http://169.254.169.254/latest/meta-data/"),
])
def test_an_internal_address_is_refused(answers: tuple[str, ...], url: str) -> None:
    with pytest.raises(ToolFailure) as refused:
        _check_connect(_policy(*answers), url)
    assert refused.value.code is ErrorCode.HOST_NOT_ALLOWED
    assert "MCP server host" in refused.value.message


def test_an_allowlisted_network_is_reached_pinned() -> None:
    policy = _policy("10.9.8.7", allowed=("10.9.8.0/24",))
    assert _check_connect(policy, "http://tools.internal:8931/mcp") == ["10.9.8.7"]


def test_a_name_that_does_not_resolve_is_unavailable_not_refused() -> None:
    with pytest.raises(ToolFailure) as failed:
        _check_connect(_policy(), "https://nowhere.example.com/mcp")
    assert failed.value.code is ErrorCode.INTEGRATION_UNAVAILABLE


@pytest.mark.parametrize(("url", "shown"), [
    ("https://mcp.example.com:8443/mcp", "https://mcp.example.com:8443/mcp"),
    ("https://user:pw-SECRET@mcp.example.com/mcp", "https://[redacted]@mcp.example.com/mcp"),
    ("https://mcp.example.com/mcp?key=SECRET", "https://mcp.example.com/mcp?[redacted]"),
    ("https://mcp.example.com/mcp#SECRET", "https://mcp.example.com/mcp#[redacted]"),
    ("http://[::1/mcp?SECRET", "[redacted]"),
])
def test_a_stored_url_is_answered_without_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@pytest.mark.parametrize("url", [
    "https://u:p@mcp.example.com/", "https://mcp.example.com/?", "https://mcp.example.com/#x",
    "https://mcp.example.com/a b", "https://mcp.example.com/<x>", "http://[::1/", "file:///etc",
])
def test_stored_url_problems(url: str) -> None:
    problem = stored_url_problem(url)
    assert problem is not None and url not in problem


def test_a_plain_url_has_no_problem() -> None:
    assert stored_url_problem("https://mcp.example.com:8443/v1/mcp") is None
