"""The HTTP transport of stored MCP servers checks every request and connects to the address
it checked (a name cannot answer one address to the check and another to the connection), with
the real ``httpx2`` client and a recording listener on loopback as the witness."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import httpx2
import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.mcp.http_guard import GuardedTransport
from tests.support.mcp_witness import RecordingListener


async def _post(url: str, check: GuardedTransport) -> int:
    async with httpx2.AsyncClient(transport=check,
                                  headers={"Authorization": "Bearer x"}) as client:
        return (await client.post(url, json={})).status_code


def test_a_request_goes_to_the_checked_address_with_its_host_header() -> None:
    checked: list[str] = []

    def check(url: str) -> Sequence[str] | None:
        checked.append(url)
        return ["127.0.0.1"]  # what the check resolved; the name itself resolves nowhere

    with RecordingListener() as listener:
        url = f"http://mcp.invalid:{listener.port}/mcp"
        status = anyio.run(_post, url, GuardedTransport(check))
    assert status == 404  # the listener's answer: it got the request
    assert checked == [url]
    assert [(r.method, r.path, r.headers["Host"]) for r in listener.requests] == [
        ("POST", "/mcp", f"mcp.invalid:{listener.port}")]


def test_a_refused_request_is_never_sent() -> None:
    def refuse(url: str) -> Sequence[str] | None:
        raise ToolFailure(ErrorCode.HOST_NOT_ALLOWED, "refused")

    with RecordingListener() as listener, pytest.raises(ToolFailure) as refused:
        anyio.run(_post, f"{listener.url}/latest/meta-data/", GuardedTransport(refuse))
    assert refused.value.code is ErrorCode.HOST_NOT_ALLOWED
    assert listener.requests == []
