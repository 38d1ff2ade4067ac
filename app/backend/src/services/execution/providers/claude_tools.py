"""Our tool domains as the in-process MCP server ``studio`` that the Claude Code CLI calls.

Built directly on ``mcp.server.Server`` (the Claude Agent SDK accepts any such server as an ``sdk``
MCP server) rather than ``create_sdk_mcp_server`` so the handler can read the ``tool_use`` id the
CLI puts in the request's ``_meta`` (``claudecode/toolUseId``): that id becomes the call id, which
keys idempotency and the journal. Arguments go to the gateway unvalidated: the dispatcher validates
them and answers ``invalid_arguments`` in an envelope the model can read.

Every call goes through :meth:`ToolGateway.call_tool`. When the gateway raises (a guard stopped the
run, or anything else), the handler keeps the exception for the engine to re-raise once the session
has ended, asks the engine to interrupt the CLI, and answers the model with a short error text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import anyio
from claude_agent_sdk import McpSdkServerConfig
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from services.execution.messages import ToolSchema
from services.execution.ports import ToolGateway
from services.execution.providers.schema_profiles import anthropic

SERVER_NAME = "studio"
TOOL_USE_ID_META = "claudecode/toolUseId"
# Claude Code moves a larger result to a file and shows a preview; the model could not read that
# file (the built-in tools are off), so results stay inline up to this size.
MAX_RESULT_CHARS = 500_000
_TOOL_META: dict[str, Any] = {
    "anthropic/maxResultSizeChars": MAX_RESULT_CHARS,
    "anthropic/alwaysLoad": True,
}


MAX_TOOL_NAME = 64
_PREFIX = f"mcp__{SERVER_NAME}__"


def local_tool_name(tool_name: str) -> str:
    """The name a tool has inside the ``studio`` server.

    An MCP tool (``mcp__<server>__<tool>``) drops its ``mcp__`` (Claude Code adds its own); a
    name that would still make Claude Code's full name longer than 64 characters is shortened
    with a digest, so that every name the model sees is valid for the API.
    """
    local = tool_name.removeprefix("mcp__")
    if len(_PREFIX) + len(local) > MAX_TOOL_NAME:
        digest = hashlib.sha256(local.encode()).hexdigest()[:8]
        local = f"{local[:MAX_TOOL_NAME - len(_PREFIX) - 9]}_{digest}"
    return local


def allowed_tool_name(tool_name: str) -> str:
    """How Claude Code names one of our tools (``mcp__studio__workspace_read_file``)."""
    return _PREFIX + local_tool_name(tool_name)


class GatewayBridge:
    """Forwards the CLI's tool calls to the gateway; remembers the first exception it raised.

    Calls are dispatched one at a time, in the order the CLI sent them (the CLI may run several
    tool calls of one turn concurrently): the journal, idempotency and the guards see the same
    sequential order as with the turn-based providers.
    """

    def __init__(self, gateway: ToolGateway, on_stop: Callable[[], None]) -> None:
        self._gateway = gateway
        self._on_stop = on_stop
        self._lock = anyio.Lock()
        self.stop_error: Exception | None = None
        self.calls = 0

    async def call(self, call_id: str | None, name: str, args: dict[str, Any]) -> CallToolResult:
        """One tool call: the envelope as JSON text, ``isError`` when the envelope is not ok."""
        async with self._lock:
            if self.stop_error is not None:
                return _text_result(f"stopped: {self.stop_error}", is_error=True)
            self.calls += 1
            try:
                envelope = await self._gateway.call_tool(call_id, name, args)
            except Exception as exc:  # kept, re-raised by the engine once the CLI has stopped
                self.stop_error = exc
                self._on_stop()
                return _text_result(f"stopped: {exc}", is_error=True)
        text = json.dumps(envelope, ensure_ascii=False, separators=(",", ":"), default=str)
        return _text_result(text, is_error=not envelope.get("ok", False))


def _text_result(text: str, *, is_error: bool) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=is_error)


def build_server(tools: list[ToolSchema], bridge: GatewayBridge) -> McpSdkServerConfig:
    """The ``studio`` MCP server exposing ``tools`` (Anthropic schema profile)."""
    neutral = {local_tool_name(schema.name): schema.name for schema in tools}
    listing = ListToolsResult(
        tools=[
            Tool(
                name=local_tool_name(schema.name),
                description=schema.description,
                input_schema=anthropic(schema.parameters),
                _meta=dict(_TOOL_META),
            )
            for schema in tools
        ]
    )

    async def on_list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return listing

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: CallToolRequestParams
    ) -> CallToolResult:
        meta: dict[str, Any] = dict(params.meta or {})
        call_id = meta.get(TOOL_USE_ID_META)
        return await bridge.call(
            call_id if isinstance(call_id, str) else None,
            neutral.get(params.name, params.name), dict(params.arguments or {}),
        )

    server: Server[Any] = Server(
        SERVER_NAME, version="1.0.0", on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )
    return McpSdkServerConfig(type="sdk", name=SERVER_NAME, instance=server)
