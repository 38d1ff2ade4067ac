"""The token for the harness's own git network operations, as environment of one git process.

:class:`TokenGitAuth` implements ``ports.GitAuth``. The token travels only as an HTTP header
configured through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``:

* ``http.<scheme>://<host>[:port]/.extraHeader = Authorization: Basic base64(x-access-token:TOKEN)``
  so git sends it only to the repository's own origin (git matches ``http.<url>.*`` against the
  request URL);
* ``http.followRedirects = false`` so a redirect to another host is never followed.

Nothing is written to ``.git/config``, no URL ever carries the credential, and a URL on another
origin gets an empty mapping (no token at all).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field

from services.execution.errors import ConfigError
from services.repos.urls import url_origin


def basic_header(token: str) -> str:
    """The ``Authorization`` header value git sends (GitHub's ``x-access-token`` convention)."""
    credential = base64.b64encode(f"x-access-token:{token}".encode()).decode("ascii")
    return f"Authorization: Basic {credential}"


@dataclass(frozen=True)
class TokenGitAuth:
    """A token scoped to one origin (``https://github.com``, ``http://127.0.0.1:8080``)."""

    token: str = field(repr=False)
    host_origin: str

    def __post_init__(self) -> None:
        if not self.token or any(ch.isspace() for ch in self.token):
            raise ConfigError("the git token is empty or contains whitespace")
        normalized = url_origin(self.host_origin)
        if normalized is None:
            raise ConfigError("the git token's origin must be an http(s) scheme://host[:port]")
        object.__setattr__(self, "host_origin", normalized)

    def environment(self, remote_url: str) -> Mapping[str, str]:
        """``GIT_CONFIG_*`` variables carrying the token for ``remote_url``, or ``{}`` when
        ``remote_url`` is on another origin."""
        if url_origin(remote_url) != self.host_origin:
            return {}
        return {
            "GIT_CONFIG_COUNT": "2",
            "GIT_CONFIG_KEY_0": f"http.{self.host_origin}/.extraHeader",
            "GIT_CONFIG_VALUE_0": basic_header(self.token),
            "GIT_CONFIG_KEY_1": "http.followRedirects",
            "GIT_CONFIG_VALUE_1": "false",
        }
