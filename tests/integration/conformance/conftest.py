"""The conformance table runs only inside a loopback-only network namespace.

Outside one (``STUDIO_IN_NETNS`` unset), only ``test_in_loopback_namespace.py`` is collected: it
re-runs this directory under ``unshare -n`` and asserts the table passed. Inside
(``STUDIO_IN_NETNS=1``), only the table is collected, so CI runs it exactly once.
Run it directly::

    unshare -n .venv/bin/python -m tests.integration.conformance.netns \
        .venv/bin/pytest tests/integration/conformance
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from services.execution.mcp.bridge import McpHub
from services.execution.mcp.config import parse_mcp_config
from services.execution.ports import CommandSandbox
from services.execution.sandbox.selection import select_sandbox
from tests.integration.conformance.netns import MARKER
from tests.integration.mcp_fixtures import stdio_server_entry
from tests.support.mcp_servers import running_http_server

IN_NETNS = os.environ.get(MARKER) == "1"
collect_ignore = ["test_in_loopback_namespace.py"] if IN_NETNS else ["test_table.py"]


@pytest.fixture(scope="session")
def mcp_hub() -> Iterator[McpHub]:
    """One stdio (``local``) and one streamable-HTTP (``remote``) MCP server, for every row.

    Shared by the whole table: the demo tools the rows call (``echo``, ``add``) keep no state.
    """
    with running_http_server() as url:
        config = parse_mcp_config({"servers": {
            "local": stdio_server_entry(),
            "remote": {"transport": "http", "url": url},
        }})
        hub = McpHub(config, base_env={"LANG": "C.UTF-8"})
        hub.start(strict=True)
        try:
            yield hub
        finally:
            hub.close()


@pytest.fixture(scope="session")
def sandbox() -> CommandSandbox:
    """The real command sandbox of this process (the strongest that works)."""
    return select_sandbox("auto")
