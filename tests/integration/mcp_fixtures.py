"""Helpers of the MCP tests: two demo servers in a config file (the fixtures over them,
``mcp_http_url``, ``mcp_config_file`` and ``mcp_hub``, are in ``tests/integration/conftest.py``).

Servers: ``local`` (stdio, with
``MCP_DEMO_FLAG=on`` in its configured env) and ``remote`` (streamable HTTP on 127.0.0.1);
both offer :data:`tests.support.mcp_servers.DEMO_TOOLS`, so the provider-facing names are
:func:`expected_tool_names`.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from services.execution.mcp.bridge import mcp_tool_name
from services.execution.sandbox.layout import sandbox_python
from tests.support.mcp_servers import DEMO_TOOLS, SCRIPT, stdio_server_params

MCP_SERVERS = ("local", "remote")
DEMO_FLAG = ("MCP_DEMO_FLAG", "on")
STDIO_DEMO = SCRIPT.with_name("stdio_demo_server.py")


def stdio_server_entry(**overrides: Any) -> dict[str, Any]:
    """A config entry starting the demo stdio server."""
    command, args = stdio_server_params()
    entry: dict[str, Any] = {"transport": "stdio", "command": command, "args": args,
                             "env": {DEMO_FLAG[0]: DEMO_FLAG[1]}}
    return {**entry, **overrides}


def workspace_server_entry(workspace: Path, **overrides: Any) -> dict[str, Any]:
    """A stored server entry starting the demo tools' standard-library server from a copy in
    ``workspace``, with the base interpreter: a stored stdio server runs in the command sandbox,
    which sees the system and the workspace, not the test tree or its virtual environment (a
    checkout under ``/tmp`` is hidden there)."""
    for source in (STDIO_DEMO, STDIO_DEMO.with_name("stdio_mcp.py")):
        shutil.copy(source, workspace / source.name)
    return stdio_server_entry(command=sandbox_python(),
                              args=[str(workspace / STDIO_DEMO.name)], **overrides)


def write_mcp_config(path: Path, servers: dict[str, dict[str, Any]]) -> Path:
    """Write ``{"servers": servers}`` to ``path`` as the MCP config file."""
    path.write_text(json.dumps({"servers": servers}, indent=2), encoding="utf-8")
    return path


def expected_tool_names(servers: tuple[str, ...] = MCP_SERVERS) -> set[str]:
    return {mcp_tool_name(server, tool) for server in servers for tool in DEMO_TOOLS}
