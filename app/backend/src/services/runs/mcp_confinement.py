"""What a stored MCP server may reach and run, checked where the rules live.

Stored servers (``/api/mcp-servers``, ``studio mcp``) are data that an ``admin`` token wrote; the
servers of the deployment's file (``STUDIO_MCP_CONFIG``) are the operator's own and keep running
as that file says. For a stored server:

* its HTTP URL passes the repository host rules (:class:`services.repos.hosts.HostPolicy`, the
  operator's ``STUDIO_REPO_ALLOWED_HOSTS``): when it is stored (:func:`check_stored_server`,
  loopback allowed only from the CLI) and again before every request of a run
  (:func:`address_check`, the name resolved again and the connection pinned to the checked
  address); a refusal is ``host_not_allowed``;
* its stdio command starts in the command sandbox (:func:`launcher`,
  :func:`services.execution.sandbox.servers.server_command`) with the locale and its own
  declared ``env`` only, in the execution's workspace;
* a server that does not start is a ``warning`` event ``mcp_server_failed`` on the execution
  (:func:`report_failures`), and the execution's error (``mcp_server_failed``) when the server
  is ``required``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path

from services.composition import command_sandbox
from services.db.redaction import Redactor
from services.execution.errors import ConfigError, ErrorCode, ToolFailure
from services.execution.mcp.config import (
    HttpServerConfig,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    stored_url_problem,
)
from services.execution.ports import AgentEvent, AgentEventKind, EventSink, PreparedCommand
from services.execution.sandbox.servers import server_command
from services.repos.hosts import HostPolicy
from services.settings import StudioSettings

FAILED = ErrorCode.MCP_SERVER_FAILED.value


def _refused(host_refusal: tuple[str, dict[str, object]]) -> str:
    details = host_refusal[1]
    shown = f" ({details['address']})" if "address" in details else ""
    return (f"the MCP server host {details.get('host')}{shown} is a "
            f"{str(details.get('kind', 'internal')).replace('_', '-')} address; list it in "
            f"STUDIO_REPO_ALLOWED_HOSTS to allow it")


def check_stored_server(settings: StudioSettings, server: ServerConfig, *,
                        allow_loopback: bool) -> None:
    """Refuse what may not be stored: a URL with a credential or markup
    (``invalid_arguments``), a host the repository rules refuse (``host_not_allowed``), a
    stdio ``cwd`` (a stored server starts in the execution's workspace)."""
    if isinstance(server, StdioServerConfig):
        if server.cwd is not None:
            raise ConfigError("a stored stdio MCP server starts in the execution's workspace: "
                              "cwd is refused", code=ErrorCode.INVALID_ARGUMENTS,
                              details={"field": "cwd"})
        return
    problem = stored_url_problem(server.url)
    if problem is not None:
        raise ConfigError(f"url: {problem}", code=ErrorCode.INVALID_ARGUMENTS,
                          details={"field": "url"})
    policy = HostPolicy.from_settings(settings, allow_loopback=allow_loopback)
    refusal = policy.refusal(server.url)
    if refusal is not None:
        details = {k: v for k, v in refusal[1].items() if k != "setting"}
        raise ConfigError(_refused(refusal), code=ErrorCode.HOST_NOT_ALLOWED,
                          details={"field": "url", **details})


def _check_connect(policy: HostPolicy, url: str) -> list[str] | None:
    try:
        pin = policy.check_connect(url)
    except ToolFailure as exc:
        if exc.code is ErrorCode.HOST_NOT_ALLOWED:
            raise ToolFailure(ErrorCode.HOST_NOT_ALLOWED,
                              _refused((exc.message, exc.details)),
                              details=exc.details) from None
        raise ToolFailure(ErrorCode.INTEGRATION_UNAVAILABLE,
                          "the MCP server host does not resolve", details=exc.details,
                          retryable=True) from None
    if pin is None:
        return None
    # "host:port:a,b" (libcurl's resolve format); the host is a name here, never a literal
    return [address.strip("[]") for address in pin.split(":", 2)[2].split(",")]


def address_check(settings: StudioSettings) -> functools.partial[list[str] | None]:
    """The check of every request to a stored HTTP server (loopback only when allowlisted)."""
    return functools.partial(_check_connect,
                             HostPolicy.from_settings(settings, allow_loopback=False))


def launcher(settings: StudioSettings, workspace: Path
             ) -> functools.partial[PreparedCommand]:
    """Starts a stored stdio server in this process's command sandbox, in ``workspace``."""
    return functools.partial(_launch, settings, workspace)


def _launch(settings: StudioSettings, workspace: Path, argv: list[str],
            env: dict[str, str]) -> PreparedCommand:
    return server_command(command_sandbox(settings), argv, workspace=workspace, env=env)


def confinement(settings: StudioSettings, config: McpConfig, stored: Sequence[str],
                workspace: Path) -> tuple[dict[str, functools.partial[PreparedCommand]],
                                          dict[str, functools.partial[list[str] | None]]]:
    """The launchers and address checks of the stored servers of ``config``."""
    launchers: dict[str, functools.partial[PreparedCommand]] = {}
    checks: dict[str, functools.partial[list[str] | None]] = {}
    for name in stored:
        server = config.servers.get(name)
        if isinstance(server, StdioServerConfig):
            launchers[name] = launcher(settings, workspace)
        elif isinstance(server, HttpServerConfig):
            checks[name] = address_check(settings)
    return launchers, checks


def report_failures(failures: Mapping[str, ConfigError], config: McpConfig, sink: EventSink,
                    execution_id: str, cycle: int, redactor: Redactor) -> None:
    """One ``warning`` event per server that did not start; ``mcp_server_failed`` (raised)
    when one of them is ``required``."""
    required: list[str] = []
    for name, error in failures.items():
        server = config.servers.get(name)
        is_required = bool(server is not None and server.required)
        data: dict[str, object] = {
            "code": FAILED, "server": name, "required": is_required,
            "cause": error.details.get("cause_code"),
            "message": redactor.text(error.message)[:2000],
        }
        sink.emit(AgentEvent(kind=AgentEventKind.WARNING, execution_id=execution_id,
                             cycle=cycle, data=data))
        if is_required:
            required.append(name)
    if required:
        first = failures[required[0]]
        raise ConfigError(f"the required MCP server {required[0]!r} did not start: "
                          f"{redactor.text(first.message)[:500]}",
                          code=ErrorCode.MCP_SERVER_FAILED,
                          details={"servers": required,
                                   "cause": first.details.get("cause_code")})
