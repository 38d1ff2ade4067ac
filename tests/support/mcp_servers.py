"""Stand-ins for third-party MCP servers (what a user would list in ``STUDIO_MCP_CONFIG``).

Both are real MCP servers built with the ``mcp`` server library (``MCPServer``, formerly
FastMCP), spoken to over the real transports:

- ``stdio``: run this file as a script (``python tests/support/mcp_servers.py stdio`` or
  ``python -m tests.support.mcp_servers stdio``); it serves MCP on stdin/stdout and exits when
  its stdin closes.
- ``http``: ``python tests/support/mcp_servers.py http`` binds 127.0.0.1 on a free port, prints
  ``PORT <n>`` on stdout, serves streamable HTTP at ``/mcp`` and exits when its stdin closes, so
  it stops by itself when the test that started it (:func:`running_http_server`) ends or dies.

Tools: ``echo(text)``, ``add(a, b)`` (structured output), ``fail(reason)`` (answers with
``isError``), ``env_names()`` (the names of its environment variables, to check what leaks into a
server), ``pid()``, ``sleep(seconds)``, and one tool whose name is too long to be offered
(:data:`LONG_TOOL_NAME`).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

SCRIPT = Path(__file__).resolve()
# 55 characters: with ``mcp__<server>__`` in front (server names of 3+ characters) it is over
# the 64 a provider accepts.
LONG_TOOL_NAME = "a_tool_whose_name_is_much_too_long_for_any_provider_api"
DEMO_TOOLS = ("echo", "add", "fail", "env_names", "pid", "sleep")


def build_server(name: str) -> MCPServer[Any]:
    """One MCP server with the demo tools."""
    server = MCPServer(name, log_level="WARNING")
    read_only = ToolAnnotations(read_only_hint=True)

    @server.tool(description="Echo the text back.", annotations=read_only)
    def echo(text: str) -> str:
        return text

    @server.tool(description="Add two integers.", annotations=read_only)
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool(description="Always fails with the given reason.")
    def fail(reason: str) -> str:
        raise ToolError(reason)

    @server.tool(description="Names of the server's environment variables.", annotations=read_only)
    def env_names() -> list[str]:
        return sorted(os.environ)

    @server.tool(description="The server's process id.", annotations=read_only)
    def pid() -> int:
        return os.getpid()

    @server.tool(description="Sleep, then answer.", annotations=read_only)
    async def sleep(seconds: float) -> str:
        await anyio.sleep(seconds)
        return "slept"

    @server.tool(name=LONG_TOOL_NAME, description="Named too long for a provider once prefixed.")
    def long_name() -> str:
        return "unreachable through the bridge"

    return server


def _exit_when_stdin_closes(on_close: Callable[[], None]) -> None:
    def watch() -> None:
        while sys.stdin.buffer.read(1):
            pass
        on_close()

    threading.Thread(target=watch, daemon=True).start()


def serve_http() -> None:
    """Serve streamable HTTP on a free port of 127.0.0.1 until stdin closes."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # listening before the port is announced: early clients queue, not fail
    app = build_server("demo-http").streamable_http_app()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))

    def stop() -> None:
        server.should_exit = True

    _exit_when_stdin_closes(stop)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    server.run(sockets=[sock])


def stdio_server_params() -> tuple[str, list[str]]:
    """``(command, args)`` that start the stdio server (no dependence on cwd or PYTHONPATH)."""
    return sys.executable, [str(SCRIPT), "stdio"]


@contextmanager
def running_http_server() -> Iterator[str]:
    """Start the streamable-HTTP server in a child process; yield its URL; stop it."""
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "http"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"MCP HTTP server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else "stdio"
    if mode == "stdio":
        build_server("demo-stdio").run("stdio")
    elif mode == "http":
        serve_http()
    else:
        raise SystemExit(f"usage: {argv[0]} stdio|http")


if __name__ == "__main__":
    main(sys.argv)
