"""MCP servers as tools for every provider.

:class:`McpHub` connects every server of an :class:`~services.execution.mcp.config.McpConfig`
(stdio or streamable HTTP, through the ``mcp`` client library) and offers each of their tools as
a :class:`ToolSpec` named ``mcp__<server>__<tool>`` in domain ``mcp``. Those specs go into the
same :class:`ToolRegistry` as the native domains, so an MCP call takes the dispatcher's path like
any other: argument check, envelope, idempotency, events, loop detection.

Threads: the hub owns one background thread running an event loop (an anyio blocking portal).
Each server's connection lives in one task on that loop from connect to close (the transports'
task groups must be entered and left by the same task). Tool handlers are synchronous, as the
dispatcher wants: they submit ``call_tool`` to the loop and block until it answers or times out.

Failures: a server that cannot be started is recorded in :attr:`McpHub.failures` (a
:class:`ConfigError` each) and left out; the others still serve (``start(strict=True)`` raises
instead). At call time an unreachable server is ``integration_unavailable`` (retryable), an MCP
error or an ``isError`` result is ``mcp_tool_error``; the model sees both as tool results.
A stdio server that crashed (its connection closed, not a timeout) is started again once per
hub, that is once per execution attempt (F5): the call is answered ``mcp_server_crashed``
(retryable: the call's outcome is unknown, the model may make it again) and later calls go to
the new process; a second crash ends the run with ``mcp_server_crashed``
(:class:`~services.execution.errors.RunEndingError`, an ``infrastructure`` error: the
execution is retried). Never a hang: every call is bounded by the server's ``timeout_s``.

Environment: a stdio server gets the ``mcp`` library's fixed safe list (``HOME``, ``LOGNAME``,
``PATH``, ``SHELL``, ``TERM``, ``USER``), then ``base_env`` from the composition root (e.g.
``LANG``), then the server's own ``env`` from the config; never the rest of the parent's
environment. This module reads no environment variable itself.

Confinement (given by the composition root, which knows the sandbox and the host rules): a
server with a ``launcher`` is not started by the ``mcp`` library but as the
:class:`~services.execution.ports.PreparedCommand` the launcher answers for its argv and its
environment (``base_env`` and its own ``env`` only), through
:mod:`~services.execution.mcp.process`; an HTTP server with an ``address_check`` sends every
request through :class:`~services.execution.mcp.http_guard.GuardedTransport`. A failure keeps
the code of its cause in ``details["cause_code"]`` (``sandbox_unavailable``,
``host_not_allowed``).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import re
import tempfile
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, cast

import anyio
import anyio.from_thread
import httpx2
import mcp_types as types
from anyio.abc import TaskStatus
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from pydantic import ConfigDict

from services.execution.errors import (
    ConfigError,
    ErrorCode,
    RunEndingError,
    StudioError,
    ToolFailure,
)
from services.execution.mcp.config import (
    HttpServerConfig,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    load_mcp_config,
)
from services.execution.mcp.http_guard import AddressCheck, GuardedTransport
from services.execution.mcp.process import prepared_stdio_client
from services.execution.mcp.results import error_text, result_json
from services.execution.ports import PreparedCommand
from services.execution.tool_domains.context import DEFAULT_OUTPUT_CAP_BYTES, ToolDomainContext
from services.execution.tool_domains.dispatch import ToolRegistry
from services.execution.tool_domains.spec import ToolArgs, ToolSpec

log = logging.getLogger(__name__)

DOMAIN = "mcp"
TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
DEFAULT_CONNECT_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 15.0  # the stdio transport's own escalation is bounded at about 6 s
HTTP_READ_TIMEOUT_S = 300.0
MAX_TOOL_PAGES = 50
STDERR_TAIL_CHARS = 1000
ServerLauncher = Callable[[list[str], dict[str, str]], PreparedCommand]  # (argv, env)
_TRANSPORT_ERRORS = (OSError, httpx2.HTTPError, anyio.BrokenResourceError,
                     anyio.ClosedResourceError, anyio.EndOfStream)


class McpToolArgs(ToolArgs):
    """Any arguments: the server's own input schema is what the model sees and what it checks."""

    model_config = ConfigDict(extra="allow")


def mcp_tool_name(server: str, tool: str) -> str:
    """The provider-facing name of an MCP tool."""
    return f"{DOMAIN}__{server}__{tool}"


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _describe(exc: BaseException) -> str:
    parts = []
    for leaf in _leaves(exc):
        text = str(leaf) or ("no answer in time" if isinstance(leaf, TimeoutError) else "")
        parts.append(f"{type(leaf).__name__}: {text}" if text else type(leaf).__name__)
    return "; ".join(parts)


def _unavailable(server: str, tool: str, why: str, **details: Any) -> ToolFailure:
    return ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE, f"MCP server {server!r} {why}",
                       details={"server": server, "tool": tool, **details}, retryable=True)


def _cause_code(exc: BaseException) -> str | None:
    """The code of the first project error among ``exc``'s leaves and their causes."""
    for leaf in _leaves(exc):
        current: BaseException | None = leaf
        while current is not None:
            if isinstance(current, StudioError):
                return current.code.value
            current = current.__cause__
    return None


def _stderr_tail(errlog: TextIO) -> str:
    errlog.seek(0)
    return errlog.read()[-STDERR_TAIL_CHARS:]


class _Connection:
    """One configured server, owned by one task on the hub's event loop."""

    def __init__(self, name: str, config: ServerConfig, base_env: Mapping[str, str],
                 connect_timeout_s: float, launcher: ServerLauncher | None = None,
                 address_check: AddressCheck | None = None) -> None:
        self.name = name
        self.config = config
        self.base_env = dict(base_env)
        self.connect_timeout_s = connect_timeout_s
        self.launcher = launcher
        self.address_check = address_check
        self.session: ClientSession | None = None
        self._stop: anyio.Event | None = None

    async def run(self, *, task_status: TaskStatus[list[types.Tool]]) -> None:
        """Connect, list the tools, report them, then hold the connection until :meth:`stop`."""
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errfile:
            errlog = cast(TextIO, errfile)  # typeshed says IO[str]; it is a text file
            try:
                await self._serve(errlog, task_status)
            except Exception as exc:  # translated once, here: every transport fails its own way
                tail = _stderr_tail(errlog) if isinstance(self.config, StdioServerConfig) else ""
                details = {"server": self.name, "stderr_tail": tail}
                if (code := _cause_code(exc)) is not None:
                    details["cause_code"] = code
                raise ConfigError(f"MCP server {self.name!r} failed: {_describe(exc)}",
                                  details=details) from exc
            finally:
                self.session = None

    async def _serve(self, errlog: TextIO, task_status: TaskStatus[list[types.Tool]]) -> None:
        async with AsyncExitStack() as stack:
            read, write = await self._open(stack, errlog)
            session = await stack.enter_async_context(ClientSession(read, write))
            with anyio.fail_after(self.connect_timeout_s):
                await session.initialize()
                tools = await _list_tools(session)
            self._stop = anyio.Event()
            self.session = session
            task_status.started(tools)
            await self._stop.wait()

    async def _open(self, stack: AsyncExitStack, errlog: TextIO) -> Any:
        config = self.config
        if isinstance(config, StdioServerConfig) and self.launcher is not None:
            prepared = self.launcher([config.command, *config.args],
                                     {**self.base_env, **config.env})
            return await stack.enter_async_context(prepared_stdio_client(prepared, errlog))
        if isinstance(config, StdioServerConfig):
            params = StdioServerParameters(command=config.command, args=list(config.args),
                                           env={**self.base_env, **config.env}, cwd=config.cwd)
            return await stack.enter_async_context(stdio_client(params, errlog=errlog))
        client = await stack.enter_async_context(_http_client(config, self.address_check))
        return await stack.enter_async_context(
            streamable_http_client(config.url, http_client=client))

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session = self.session
        if session is None:
            raise _unavailable(self.name, tool, "is not connected")
        timeout = self.config.timeout_s
        try:
            with anyio.fail_after(timeout):
                return await session.call_tool(tool, arguments)
        except TimeoutError as exc:
            raise _unavailable(self.name, tool, f"did not answer {tool!r} within {timeout:g} s",
                               timed_out=True) from exc
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise _unavailable(self.name, tool, "closed the connection") from exc
            raise ToolFailure(ErrorCode.MCP_TOOL_ERROR,
                              f"MCP server {self.name!r} refused {tool!r}: {exc.message}",
                              details={"server": self.name, "tool": tool, "mcp_code": exc.code},
                              ) from exc
        except _TRANSPORT_ERRORS as exc:
            raise _unavailable(self.name, tool, f"is unreachable ({_describe(exc)})") from exc
        except RuntimeError as exc:  # output failing its schema, an input request we cannot answer
            raise ToolFailure(ErrorCode.MCP_TOOL_ERROR,
                              f"MCP server {self.name!r} answered {tool!r} unusably: {exc}",
                              details={"server": self.name, "tool": tool}) from exc


def _http_client(config: HttpServerConfig,
                 address_check: AddressCheck | None = None) -> httpx2.AsyncClient:
    timeout = httpx2.Timeout(config.timeout_s, read=max(config.timeout_s, HTTP_READ_TIMEOUT_S))
    transport = GuardedTransport(address_check) if address_check is not None else None
    return httpx2.AsyncClient(headers=dict(config.headers), timeout=timeout,
                              transport=transport, follow_redirects=False)


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _input_schema(tool: types.Tool) -> dict[str, Any] | None:
    """The tool's input schema as a root ``object`` schema, or None when it is not one."""
    schema = dict(tool.input_schema)
    schema.setdefault("type", "object")
    if schema["type"] != "object":
        return None
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return schema


@dataclass(frozen=True)
class _ToolHandler:
    """The synchronous handler of one MCP tool: one ``tools/call`` on the hub's loop."""

    hub: McpHub
    server: str
    tool: str

    def __call__(self, args: McpToolArgs, ctx: ToolDomainContext) -> dict[str, Any]:
        return self.hub.call_tool(self.server, self.tool, dict(args.model_extra or {}),
                                  output_cap_bytes=ctx.output_cap_bytes)


class McpHub:
    """Every configured MCP server, connected, and its tools as specs."""

    def __init__(self, config: McpConfig, *, base_env: Mapping[str, str] | None = None,
                 connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
                 launchers: Mapping[str, ServerLauncher] | None = None,
                 address_checks: Mapping[str, AddressCheck] | None = None) -> None:
        self.config = config
        self._base_env = dict(base_env or {})
        self._launchers = dict(launchers or {})
        self._address_checks = dict(address_checks or {})
        self._connect_timeout_s = connect_timeout_s
        self._exit = ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._live: dict[str, tuple[_Connection, concurrent.futures.Future[None]]] = {}
        self._specs: list[ToolSpec] = []
        self.failures: dict[str, ConfigError] = {}
        self.skipped: dict[str, str] = {}  # tool name -> why it is not offered
        self.restarted: set[str] = set()  # stdio servers started again after a crash

    @classmethod
    def from_file(cls, path: Path, **kwargs: Any) -> McpHub:
        return cls(load_mcp_config(path), **kwargs)

    def __enter__(self) -> McpHub:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self, *, strict: bool = False) -> None:
        """Connect every server; with ``strict``, the first failure closes all and raises."""
        if self._portal is not None:
            raise RuntimeError("McpHub already started")
        self._portal = self._exit.enter_context(
            anyio.from_thread.start_blocking_portal(backend="asyncio"))
        for name, server in self.config.servers.items():
            self._start_one(self._portal, name, server)
        if strict and self.failures:
            self.close()
            raise next(iter(self.failures.values()))

    def _start_one(self, portal: anyio.from_thread.BlockingPortal, name: str,
                   server: ServerConfig) -> None:
        conn = _Connection(name, server, self._base_env, self._connect_timeout_s,
                           self._launchers.get(name), self._address_checks.get(name))
        try:
            future, tools = portal.start_task(conn.run, name=f"mcp-{name}")
        except ConfigError as exc:
            log.warning("MCP server %s left out: %s", name, exc.message)
            self.failures[name] = exc
            return
        self._live[name] = (conn, future)
        self._specs.extend(spec for tool in tools
                           if (spec := self._spec(name, tool, server)) is not None)

    def _spec(self, server: str, tool: types.Tool, config: ServerConfig) -> ToolSpec | None:
        name = mcp_tool_name(server, tool.name)
        schema = _input_schema(tool)
        why = ("the name is not a valid provider tool name (at most 64 of a-z A-Z 0-9 _ -)"
               if not TOOL_NAME_PATTERN.match(name) else
               "its input schema is not an object schema" if schema is None else "")
        if why:
            log.warning("MCP tool %r of server %s not offered: %s", tool.name, server, why)
            self.skipped[name] = why
            return None
        read_only = tool.annotations is not None and tool.annotations.read_only_hint is True
        about = tool.description or tool.title or tool.name
        spec = ToolSpec(domain=DOMAIN, operation=f"{server}__{tool.name}",
                        description=f"{about} (MCP server {server!r})",
                        args_model=McpToolArgs, handler=_ToolHandler(self, server, tool.name),
                        mutates=not read_only, parameters=schema)
        assert spec.name == name  # ToolSpec.name is f"{domain}_{operation}"
        return spec

    def specs(self) -> list[ToolSpec]:
        """One spec per offered tool of every connected server."""
        return list(self._specs)

    def register(self, registry: ToolRegistry) -> None:
        """Add every offered tool to ``registry``."""
        for spec in self._specs:
            registry.add(spec)

    def call_tool(self, server: str, tool: str, arguments: dict[str, Any], *,
                  output_cap_bytes: int = DEFAULT_OUTPUT_CAP_BYTES) -> dict[str, Any]:
        """Call one tool and block for its answer; a failure is a :class:`ToolFailure`."""
        live, portal = self._live.get(server), self._portal
        if live is None or portal is None:
            raise _unavailable(server, tool, "is not connected")
        try:
            result = portal.call(live[0].call, tool, arguments)
        except RuntimeError as exc:  # the portal stopped under us: the hub is closing
            raise _unavailable(server, tool, "is shutting down") from exc
        except ToolFailure as failure:
            if not self._crashed(live[0], failure):
                raise
            self._restart(portal, server, tool, failure)
            raise ToolFailure(ErrorCode.MCP_SERVER_CRASHED,
                              f"MCP server {server!r} crashed during {tool!r} and was started "
                              "again; the call's outcome is unknown: make it again if needed",
                              details={"server": server, "tool": tool, "restarted": True},
                              retryable=True) from failure
        if result.is_error:
            raise ToolFailure(ErrorCode.MCP_TOOL_ERROR, error_text(result),
                              details={"server": server, "tool": tool,
                                       "structured": result.structured_content})
        return result_json(result, output_cap_bytes)

    @staticmethod
    def _crashed(conn: _Connection, failure: ToolFailure) -> bool:
        """A stdio server whose connection failed otherwise than by a timeout: its process
        ended (or its pipes broke)."""
        return (isinstance(conn.config, StdioServerConfig)
                and failure.code is ErrorCode.INTEGRATION_UNAVAILABLE
                and not failure.details.get("timed_out"))

    def _restart(self, portal: anyio.from_thread.BlockingPortal, server: str, tool: str,
                 failure: ToolFailure) -> None:
        """Start the crashed server again, once; a second crash (or a failed start) is the
        run's :class:`RunEndingError`."""
        details = {"server": server, "tool": tool, "cause": failure.message}
        if server in self.restarted:
            raise RunEndingError(f"MCP server {server!r} crashed again after its restart: "
                                 f"{failure.message}", code=ErrorCode.MCP_SERVER_CRASHED,
                                 details=details) from failure
        self.restarted.add(server)
        old, future = self._live.pop(server)
        portal.call(old.stop)
        with contextlib.suppress(ConfigError, concurrent.futures.TimeoutError,
                                 concurrent.futures.CancelledError):
            future.result(timeout=SHUTDOWN_TIMEOUT_S)  # ends as it can: its process is gone
        log.warning("MCP server %s crashed (%s); starting it again once", server,
                    failure.message)
        conn = _Connection(server, old.config, old.base_env, old.connect_timeout_s,
                           old.launcher, old.address_check)
        try:
            self._live[server] = (conn, portal.start_task(conn.run, name=f"mcp-{server}")[0])
        except ConfigError as exc:
            raise RunEndingError(f"MCP server {server!r} crashed and could not start again: "
                                 f"{exc.message}", code=ErrorCode.MCP_SERVER_CRASHED,
                                 details=details) from exc

    def close(self) -> None:
        """Disconnect every server (stdio children ended) and stop the loop thread."""
        portal, self._portal = self._portal, None
        if portal is None:
            return
        live, self._live = self._live, {}
        for conn, _ in live.values():
            portal.call(conn.stop)
        for name, (_, future) in live.items():
            try:
                future.result(timeout=SHUTDOWN_TIMEOUT_S)
            except ConfigError as exc:
                log.warning("MCP server %s ended badly: %s", name, exc.message)
            except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
                log.warning("MCP server %s did not close in time; cancelling it", name)
        self._specs = []
        self._exit.close()  # stops the loop thread, cancelling whatever is left
