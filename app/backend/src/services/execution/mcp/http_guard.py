"""Every request to an HTTP MCP server checked, and sent to the address that was checked.

An :data:`AddressCheck` is given each request's URL right before it is sent; it refuses (raises)
a host that may not be reached, and answers the addresses it checked for a name (``None`` for a
literal address or a name allowed as such). :class:`GuardedTransport` then connects to those
addresses (in order; the next one only when no connection could be made), keeping the ``Host``
header and the TLS server name (certificate checks stay on the name), so a name cannot resolve
to one address for the check and to another for the connection. A redirect the ``mcp`` client
follows (same origin only) is a new request through this transport, checked again. The check
itself comes from the composition root (the repository host rules live above the engine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import anyio
import anyio.to_thread
import httpx2

AddressCheck = Callable[[str], Sequence[str] | None]


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport that checks and pins each request (see the module docstring)."""

    def __init__(self, check: AddressCheck, inner: httpx2.AsyncBaseTransport | None = None
                 ) -> None:
        self._check = check
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        # the check resolves names (blocking): off the hub's event loop
        addresses = await anyio.to_thread.run_sync(self._check, str(request.url))
        if not addresses:
            return await self._inner.handle_async_request(request)
        host, original = request.url.host, request.url
        failure: httpx2.ConnectError | None = None
        for address in addresses:  # in the resolver's order, as a client would try them
            request.url = original.copy_with(host=address)
            request.extensions = {**request.extensions, "sni_hostname": host}
            try:
                return await self._inner.handle_async_request(request)
            except httpx2.ConnectError as exc:  # nothing was sent: the next address
                failure = exc
        assert failure is not None
        raise failure

    async def aclose(self) -> None:
        await self._inner.aclose()
