"""The demo MCP tools (:data:`tests.support.mcp_servers.DEMO_TOOLS`) served by
:mod:`tests.support.stdio_mcp`, standard library only: a third-party stdio server as a
deployment stores it, copied into a workspace with ``stdio_mcp.py`` beside it and started in the
command sandbox by the base interpreter."""

from __future__ import annotations

import os
import time

from stdio_mcp import Tool, ToolFailed, schema, serve  # type: ignore[import-not-found]


def _fail(reason: str) -> str:
    raise ToolFailed(reason)


def _sleep(seconds: float) -> str:
    time.sleep(seconds)
    return "slept"


TOOLS = [
    Tool("echo", "Echo the text back.", schema(text="string"), lambda text: text, True),
    Tool("add", "Add two integers.", schema(a="integer", b="integer"), lambda a, b: a + b, True),
    Tool("fail", "Always fails with the given reason.", schema(reason="string"), _fail),
    Tool("env_names", "Names of the server's environment variables.", schema(),
         lambda: sorted(os.environ), True),
    Tool("pid", "The server's process id.", schema(), os.getpid, True),
    Tool("sleep", "Sleep, then answer.", schema(seconds="number"), _sleep, True),
]

if __name__ == "__main__":
    serve("demo-stdio", TOOLS)
