"""A third-party stdio MCP server in the standard library alone (newline-delimited JSON-RPC 2.0:
``initialize``, ``ping``, ``tools/list``, ``tools/call``; notifications get no answer).

It stands for an MCP server a deployment stores and the harness starts in the command sandbox.
The sandbox shows the system and the workspace only, so a server copied into a workspace cannot
rely on the test run's virtual environment (which a checkout under ``/tmp`` hides): this module
and the script that uses it are copied side by side and started with the base interpreter
(:func:`services.execution.sandbox.layout.sandbox_python`).
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = "2025-06-18"


class ToolFailed(Exception):
    """Raised by a tool: answered as a tool result with ``isError``."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[..., Any]
    read_only: bool = False

    def listing(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "description": self.description,
                                 "inputSchema": self.input_schema}
        if self.read_only:
            entry["annotations"] = {"readOnlyHint": True}
        return entry


def schema(**properties: str) -> dict[str, Any]:
    """An object schema whose properties (all required) have the given JSON types."""
    return {"type": "object", "properties": {k: {"type": t} for k, t in properties.items()},
            "required": sorted(properties)}


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


class _Server:
    def __init__(self, name: str, tools: list[Tool]) -> None:
        self.name = name
        self.tools = {tool.name: tool for tool in tools}
        self.lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        with self.lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def answer(self, request: dict[str, Any]) -> None:
        ident, method = request.get("id"), request.get("method")
        params = request.get("params") or {}
        try:
            result = self.result(method, params)
        except LookupError as exc:
            self.send({"jsonrpc": "2.0", "id": ident,
                       "error": {"code": -32601, "message": str(exc)}})
            return
        self.send({"jsonrpc": "2.0", "id": ident, "result": result})

    def result(self, method: Any, params: dict[str, Any]) -> dict[str, Any]:
        if method == "initialize":
            return {"protocolVersion": params.get("protocolVersion", PROTOCOL_VERSION),
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": self.name, "version": "1.0"}}
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": [tool.listing() for tool in self.tools.values()]}
        if method == "tools/call":
            return self.call(str(params.get("name")), params.get("arguments") or {})
        raise LookupError(f"method not found: {method}")

    def call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = self.tools.get(name)
        if tool is None:
            return {"content": [{"type": "text", "text": f"unknown tool {name}"}],
                    "isError": True}
        try:
            value = tool.run(**arguments)
        except (ToolFailed, TypeError, ValueError) as exc:
            return {"content": [{"type": "text", "text": str(exc)}], "isError": True}
        return {"content": [{"type": "text", "text": _as_text(value)}], "isError": False}


def serve(name: str, tools: list[Tool]) -> None:
    """Serve ``tools`` on stdin/stdout until stdin closes; each request in a thread of its own
    (a slow tool does not hold the others)."""
    server = _Server(name, tools)
    workers: list[threading.Thread] = []
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            continue  # a notification or a response: nothing to answer
        worker = threading.Thread(target=server.answer, args=(message,), daemon=True)
        worker.start()
        workers.append(worker)
    for worker in workers:
        worker.join(timeout=5)
