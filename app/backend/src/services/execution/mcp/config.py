"""The MCP server configuration file (the one ``STUDIO_MCP_CONFIG`` names), validated.

Format (JSON)::

    {"servers": {
        "<name>": {"transport": "stdio", "command": "npx", "args": ["-y", "some-server"],
                   "env": {"API_TOKEN": "..."}, "cwd": null, "timeout_s": 60, "required": false},
        "<name>": {"transport": "http", "url": "http://127.0.0.1:8931/mcp",
                   "headers": {"Authorization": "Bearer ..."}, "timeout_s": 60}
    }}

``required``: a server the agent cannot do without. One that fails to start is always a
``warning`` event on the execution (``mcp_server_failed``); when it is ``required`` the execution
fails too, with that code. Sizes are bounded (:data:`MAX_ENTRIES`, :data:`MAX_VALUE_CHARS`, ...).
:func:`stored_url_problem` is the stricter rule of a URL stored through the API or ``studio
mcp`` (no userinfo, query or fragment, no markup characters).

Server names match ``^[a-zA-Z0-9-]{1,20}$`` so that ``mcp__<server>__<tool>`` stays a valid
provider tool name. ``env`` and ``headers`` may hold secrets: they are kept out of ``repr`` and
out of validation messages. This module reads the file it is given and nothing else (no
environment variables: the composition root decides which file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from services.execution.errors import ConfigError

SERVER_NAME_PATTERN = r"^[a-zA-Z0-9-]{1,20}$"
ServerName = Annotated[str, StringConstraints(pattern=SERVER_NAME_PATTERN)]
DEFAULT_CALL_TIMEOUT_S = 60.0
MAX_ENTRIES = 64  # args, env entries, headers
MAX_VALUE_CHARS = 8192  # one argument, env value or header value
MAX_URL_CHARS = 2048
MAX_TIMEOUT_S = 3600.0
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$")]
EnvValue = Annotated[str, StringConstraints(max_length=MAX_VALUE_CHARS, pattern=r"^[^\x00]*$")]
# No control character (a header value with a newline would be a second header).
HeaderValue = Annotated[str, StringConstraints(max_length=MAX_VALUE_CHARS,
                                               pattern=r"^[^\x00-\x1f\x7f]*$")]
_MARKUP = frozenset("<>\"'`{}|\\^ ")


class StdioServerConfig(BaseModel):
    """A server started as a child process, spoken to over its stdin/stdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["stdio"]
    command: str = Field(min_length=1, max_length=MAX_VALUE_CHARS, pattern=r"^[^\x00]*$")
    args: list[Annotated[str, StringConstraints(max_length=MAX_VALUE_CHARS,
                                                pattern=r"^[^\x00]*$")]] = Field(
        default_factory=list, max_length=MAX_ENTRIES)
    env: dict[EnvName, EnvValue] = Field(default_factory=dict, repr=False, max_length=MAX_ENTRIES)
    cwd: str | None = Field(default=None, max_length=MAX_VALUE_CHARS)
    timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)
    required: bool = False


class HttpServerConfig(BaseModel):
    """A server reached over MCP streamable HTTP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["http"]
    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=MAX_URL_CHARS)
    headers: dict[HeaderName, HeaderValue] = Field(default_factory=dict, repr=False,
                                             max_length=MAX_ENTRIES)
    timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)
    required: bool = False


ServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="transport")]


class McpConfig(BaseModel):
    """Every configured MCP server, by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[ServerName, ServerConfig] = Field(default_factory=dict)


def stored_url_problem(url: str) -> str | None:
    """Why ``url`` may not be stored (never quoting it), or ``None``: a stored URL is answered
    by the API, so it holds no credential (no userinfo, no query string) and nothing a page
    could take for markup; and it names a host."""
    if any(ch in _MARKUP or ord(ch) < 0x20 or ord(ch) == 0x7f for ch in url):
        return "a stored MCP server URL holds no space, quote, angle bracket or control character"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port out of range raises here
    except ValueError:
        return "the URL cannot be parsed (a bad port or IPv6 literal)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "the URL must be http:// or https:// and name a host"
    if "@" in parts.netloc or parts.username is not None or parts.password is not None:
        return "credentials in the URL (user:password@) are refused: put them in headers"
    if parts.query or "?" in url:
        return "a query string is refused in a stored URL (it may carry a credential): put it " \
               "in headers"
    if parts.fragment or "#" in url:
        return "a fragment is refused in a stored URL"
    return None


def shown_url(url: str) -> str:
    """``url`` as it may be answered: any userinfo, query or fragment (a server stored before
    :func:`stored_url_problem` was enforced may hold a credential there) replaced by
    ``[redacted]``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "[redacted]"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "[redacted]@" + netloc.rsplit("@", 1)[1]
    shown = f"{parts.scheme}://{netloc}{parts.path}"
    if parts.query or "?" in url:
        shown += "?[redacted]"
    if parts.fragment:
        shown += "#[redacted]"
    return shown


def parse_mcp_config(data: object, *, source: str = "MCP config") -> McpConfig:
    """The validated configuration; :class:`ConfigError` names every problem (never a value)."""
    try:
        return McpConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise ConfigError(f"invalid {source}: {summary}", details={"errors": problems}) from None


def load_mcp_config(path: Path) -> McpConfig:
    """Read and validate the configuration file at ``path``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read MCP config {path}: {exc.strerror}",
                          details={"path": str(path)}) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"MCP config {path} is not valid JSON: {exc.msg} "
                          f"(line {exc.lineno}, column {exc.colno})",
                          details={"path": str(path)}) from exc
    return parse_mcp_config(data, source=f"MCP config {path}")
