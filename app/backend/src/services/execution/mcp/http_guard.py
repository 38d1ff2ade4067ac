"""Every request to an HTTP MCP server checked, and sent to the address that was checked.

An :data:`AddressCheck` is given each request's URL right before it is sent; it refuses (raises)
a host that may not be reached, and answers the addresses it checked for a name (``None`` for a
literal address or a name allowed as such). :class:`GuardedTransport` then connects to the first
of those addresses, keeping the ``Host`` header and the TLS server name (certificate checks stay
on the name), so a name cannot resolve to one address for the check and to another for the
connection. Redirects are not followed (the client's default), so every request passes here.
The check itself comes from the composition root (the repository host rules live above the
engine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import httpx2

AddressCheck = Callable[[str], Sequence[str] | None]


class GuardedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport that checks and pins each request (see the module docstring)."""

    def __init__(self, check: AddressCheck, inner: httpx2.AsyncBaseTransport | None = None
                 ) -> None:
        self._check = check
        self._inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        addresses = self._check(str(request.url))
        if addresses:
            host = request.url.host
            request.url = request.url.copy_with(host=addresses[0])
            request.extensions = {**request.extensions, "sni_hostname": host}
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()
