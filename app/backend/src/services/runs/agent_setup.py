"""The agent an execution asked for, put together: its MCP servers, its tools, its models.

- MCP servers: the deployment's ``STUDIO_MCP_CONFIG`` servers join every agent (as before);
  the stored servers an agent names in ``mcp_servers`` join that agent only, and one named like
  a server of the file replaces the file's for that agent (:func:`agent_mcp_config`). A name
  that is not stored is refused when the execution is recorded (``unknown_mcp_server``), and
  again when it runs (a server deleted meanwhile). The decrypted ``env``/``headers`` values go
  to the run's redactor before anything can print them.
- Tools: the native domains and the MCP tools, restricted to the agent's role
  (:func:`services.execution.roles.restrict`).
- Models: the first of the agent's ``models`` (after the last recorded fallback, for a resumed
  execution) builds the engine; the rest wait in a :class:`ModelFallback`
  (:func:`services.execution.fallback.model_plan`, which touches no database).
- What is recorded on the execution's settings snapshot (:func:`agent_snapshot`): the profile
  and the price overrides in force, so ``studio executions show`` says what the run was given.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import SecretStr

from services.db.mcp_servers import McpServerRepository, secret_values
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.agent_profile import AgentProfile
from services.execution.errors import ConfigError, ErrorCode
from services.execution.mcp.config import McpConfig, load_mcp_config, parse_mcp_config
from services.settings import StudioSettings


def agent_snapshot(db: Database, settings: StudioSettings,
                   profile: AgentProfile) -> dict[str, Any]:
    """What joins the settings snapshot of a new execution; refuses an MCP server name that
    is not stored (``unknown_mcp_server``)."""
    if profile.mcp_servers:
        stored = McpServerRepository(db, settings).names()
        missing = [name for name in profile.mcp_servers if name not in stored]
        if missing:
            raise ConfigError(f"MCP server {missing[0]!r} is not stored (studio mcp list)",
                              code=ErrorCode.UNKNOWN_MCP_SERVER, details={"names": missing})
    return {"agent": profile.stored(), "price_overrides": dict(settings.model_prices)}


def stored_mcp(db: Database, settings: StudioSettings, profile: AgentProfile,
               redactor: Redactor) -> McpConfig | None:
    """The stored servers the agent names, decrypted; their secrets join ``redactor``."""
    if not profile.mcp_servers:
        return None
    if settings.execution_mcp is not None:  # handed by the worker: an executor pod's login
        config = handed_mcp(settings.execution_mcp, profile.mcp_servers)
    else:
        config = McpServerRepository(db, settings).resolve(profile.mcp_servers)
    for value in secret_values(config):
        redactor.add(value)
    return config


def handed_mcp(handed: SecretStr, names: Sequence[str]) -> McpConfig:
    """The named servers out of the configuration the worker handed the pod
    (``STUDIO_EXECUTION_MCP``); ``unknown_mcp_server`` for a name it does not hold."""
    try:
        data = json.loads(handed.get_secret_value())
    except ValueError:
        raise ConfigError("STUDIO_EXECUTION_MCP is not JSON") from None
    config = parse_mcp_config(data, source="STUDIO_EXECUTION_MCP")
    missing = [name for name in names if name not in config.servers]
    if missing:
        raise ConfigError(f"MCP server {missing[0]!r} is not stored",
                          code=ErrorCode.UNKNOWN_MCP_SERVER, details={"name": missing[0]})
    return McpConfig(servers={name: config.servers[name] for name in names})


def may_use_mcp(settings: StudioSettings, profile: AgentProfile) -> bool:
    """Whether a run of ``profile`` may start MCP servers: the deployment's file, or stored
    servers the agent names (what :func:`agent_mcp_config` is made of; read without a
    database, so a worker can tell its fork server before the run starts)."""
    return settings.mcp_config is not None or bool(profile.mcp_servers)


def agent_mcp_config(settings: StudioSettings, stored: McpConfig | None) -> McpConfig | None:
    """The deployment's servers, then the agent's stored ones (same name: the stored one)."""
    servers: dict[str, Any] = {}
    if settings.mcp_config is not None:
        servers.update(load_mcp_config(settings.mcp_config).servers)
    if stored is not None:
        servers.update(stored.servers)
    return McpConfig(servers=servers) if servers else None
