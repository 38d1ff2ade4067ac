"""The MCP server configuration file (the one ``STUDIO_MCP_CONFIG`` names), validated.

Format (JSON)::

    {"servers": {
        "<name>": {"transport": "stdio", "command": "npx", "args": ["-y", "some-server"],
                   "env": {"API_TOKEN": "..."}, "cwd": null, "timeout_s": 60},
        "<name>": {"transport": "http", "url": "http://127.0.0.1:8931/mcp",
                   "headers": {"Authorization": "Bearer ..."}, "timeout_s": 60}
    }}

Server names match ``^[a-zA-Z0-9-]{1,20}$`` so that ``mcp__<server>__<tool>`` stays a valid
provider tool name. ``env`` and ``headers`` may hold secrets: they are kept out of ``repr`` and
out of validation messages. This module reads the file it is given and nothing else (no
environment variables: the composition root decides which file).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from services.execution.errors import ConfigError

SERVER_NAME_PATTERN = r"^[a-zA-Z0-9-]{1,20}$"
ServerName = Annotated[str, StringConstraints(pattern=SERVER_NAME_PATTERN)]
DEFAULT_CALL_TIMEOUT_S = 60.0


class StdioServerConfig(BaseModel):
    """A server started as a child process, spoken to over its stdin/stdout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["stdio"]
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)
    cwd: str | None = None
    timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0)


class HttpServerConfig(BaseModel):
    """A server reached over MCP streamable HTTP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    transport: Literal["http"]
    url: str = Field(pattern=r"^https?://[^\s]+$")
    headers: dict[str, str] = Field(default_factory=dict, repr=False)
    timeout_s: float = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0)


ServerConfig = Annotated[StdioServerConfig | HttpServerConfig, Field(discriminator="transport")]


class McpConfig(BaseModel):
    """Every configured MCP server, by name."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: dict[ServerName, ServerConfig] = Field(default_factory=dict)


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
