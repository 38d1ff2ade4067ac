"""Reusable MCP fixtures: two demo servers in a config file, and a started hub over them.

Import the fixtures into a test module (``from tests.integration.mcp_fixtures import
mcp_config_file, mcp_hub, mcp_http_url``). Servers: ``local`` (stdio, with
``MCP_DEMO_FLAG=on`` in its configured env) and ``remote`` (streamable HTTP on 127.0.0.1);
both offer :data:`tests.support.mcp_servers.DEMO_TOOLS`, so the provider-facing names are
:func:`expected_tool_names`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.mcp.bridge import McpHub, mcp_tool_name
from tests.support.mcp_servers import DEMO_TOOLS, running_http_server, stdio_server_params

MCP_SERVERS = ("local", "remote")
DEMO_FLAG = ("MCP_DEMO_FLAG", "on")


def stdio_server_entry(**overrides: Any) -> dict[str, Any]:
    """A config entry starting the demo stdio server."""
    command, args = stdio_server_params()
    entry: dict[str, Any] = {"transport": "stdio", "command": command, "args": args,
                             "env": {DEMO_FLAG[0]: DEMO_FLAG[1]}}
    return {**entry, **overrides}


def write_mcp_config(path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """Write ``{"servers": servers}`` to ``path`` as the MCP config file."""
    path.write_text(json.dumps({"servers": servers}, indent=2), encoding="utf-8")
    return path


def expected_tool_names(servers: tuple[str, ...] = MCP_SERVERS) -> set[str]:
    return {mcp_tool_name(server, tool) for server in servers for tool in DEMO_TOOLS}


@pytest.fixture
def mcp_http_url() -> Iterator[str]:
    """The URL of a streamable-HTTP demo server, running for this test only."""
    with running_http_server() as url:
        yield url


@pytest.fixture
def mcp_config_file(tmp_path: Path, mcp_http_url: str) -> Path:
    """A config file naming the ``local`` (stdio) and ``remote`` (HTTP) demo servers."""
    return write_mcp_config(tmp_path / "mcp.json", {
        "local": stdio_server_entry(),
        "remote": {"transport": "http", "url": mcp_http_url},
    })


@pytest.fixture
def mcp_hub(mcp_config_file: Path) -> Iterator[McpHub]:
    """A hub with both demo servers connected (strict: a failed server fails the fixture)."""
    hub = McpHub.from_file(mcp_config_file, base_env={"LANG": "C.UTF-8"})
    hub.start(strict=True)
    try:
        yield hub
    finally:
        hub.close()
