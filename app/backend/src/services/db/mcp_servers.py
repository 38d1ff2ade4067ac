"""Stored MCP servers (``mcp_servers``): what an agent node names in ``mcp_servers``.

A server is stored in the shape of one entry of ``STUDIO_MCP_CONFIG``
(:mod:`services.execution.mcp.config`): ``stdio`` (``command``, ``args``, ``env``, ``cwd``,
``timeout_s``) or ``http`` (``url``, ``headers``, ``timeout_s``). ``env`` and ``headers`` are
the secrets: they are kept together, Fernet-encrypted with the key derived from
``STUDIO_SECRET_KEY`` (as the GitHub token of :mod:`services.db.integrations`), in
``secret_encrypted``; the ``config`` column holds the rest. Nothing here answers a secret value:
:meth:`McpServerRepository.describe` lists the names of the ``env`` and ``headers`` keys only;
:meth:`McpServerRepository.resolve` decrypts for the one run that uses them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from services.db.errors import NotFound
from services.db.integrations import fernet_for
from services.db.models import McpServer
from services.db.session import Database
from services.execution.errors import ConfigError, ErrorCode
from services.execution.mcp.config import (
    SERVER_NAME_PATTERN,
    HttpServerConfig,
    McpConfig,
    ServerConfig,
    StdioServerConfig,
    shown_url,
)

SECRET_FIELDS = ("env", "headers")
_SERVER = TypeAdapter(ServerConfig)


class UnknownMcpServer(NotFound):
    what = "MCP server"


class McpServerError(ConfigError):
    """A server that cannot be stored (invalid, or its name taken); ``code`` says which."""


def parse_server(name: str, data: object) -> ServerConfig:
    """One server's configuration validated; the message names fields, never values."""
    import re

    if not isinstance(name, str) or not re.fullmatch(SERVER_NAME_PATTERN, name):
        raise McpServerError("an MCP server name is 1 to 20 of a-z A-Z 0-9 -",
                             code=ErrorCode.INVALID_ARGUMENTS, details={"field": "name"})
    try:
        return _SERVER.validate_python(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False, include_context=False)
        ]
        summary = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise McpServerError(f"invalid MCP server {name!r}: {summary}",
                             code=ErrorCode.INVALID_ARGUMENTS,
                             details={"errors": problems}) from None


def _split(server: ServerConfig) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
    data = server.model_dump(mode="json")
    secrets = {key: data.pop(key) for key in SECRET_FIELDS if key in data}
    return data, secrets


class McpServerRepository:
    """Create, list, describe, delete and resolve stored MCP servers."""

    def __init__(self, db: Database, settings: Any) -> None:
        self._db = db
        self._settings = settings

    def create(self, name: str, data: object,
               check: Callable[[ServerConfig], None] | None = None,
               team_id: str | None = None) -> dict[str, Any]:
        """Store a server (its secrets encrypted); ``mcp_server_exists`` when the name is taken.
        ``check`` (the caller's rules: the host rules live above this layer) may refuse the
        parsed server before anything is written. Answers its description."""
        server = parse_server(name, data)
        if check is not None:
            check(server)
        config, secrets = _split(server)
        encrypted = None
        if any(secrets.values()):
            encrypted = fernet_for(self._settings.secret_key).encrypt(
                json.dumps(secrets).encode())
        try:
            with self._db.session() as session:
                if session.scalar(select(McpServer).where(McpServer.name == name)) is not None:
                    raise McpServerError(f"an MCP server named {name!r} is stored already",
                                         code=ErrorCode.MCP_SERVER_EXISTS,
                                         details={"name": name})
                session.add(McpServer(name=name, transport=server.transport, config=config,
                                      secret_encrypted=encrypted, team_id=team_id))
        except IntegrityError as exc:  # created by someone else meanwhile
            raise McpServerError(f"an MCP server named {name!r} is stored already",
                                 code=ErrorCode.MCP_SERVER_EXISTS,
                                 details={"name": name}) from exc
        return self.describe(name)

    def _row(self, name: str) -> McpServer:
        with self._db.session() as session:
            row = session.scalar(select(McpServer).where(McpServer.name == name))
        if row is None:
            raise UnknownMcpServer(name)
        return row

    def names(self) -> set[str]:
        with self._db.session() as session:
            return set(session.scalars(select(McpServer.name)))

    def describe(self, name: str) -> dict[str, Any]:
        """One server without its secrets (the key names of ``env``/``headers`` only)."""
        return self._describe(self._row(name))

    def list_servers(self, team_id: str | None = None) -> list[dict[str, Any]]:
        """Every server (of ``team_id``'s team only, when given)."""
        query = select(McpServer).order_by(McpServer.name)
        if team_id is not None:
            query = query.where(McpServer.team_id == team_id)
        with self._db.session() as session:
            rows = list(session.scalars(query))
        return [self._describe(row) for row in rows]

    def _describe(self, row: McpServer) -> dict[str, Any]:
        config = dict(row.config or {})
        if isinstance(config.get("url"), str):  # a row from before the URL rules
            config["url"] = shown_url(config["url"])
        return {
            "name": row.name, "transport": row.transport, "config": config,
            "team_id": row.team_id,
            "secret_keys": self._secret_keys(row), "enabled": row.enabled,
            "created_at": row.created_at.isoformat() if row.created_at else None,
        }

    def _secret_keys(self, row: McpServer) -> dict[str, list[str]]:
        """The names (never the values) of the stored ``env``/``headers`` entries."""
        keys = dict.fromkeys(SECRET_FIELDS if row.transport == "stdio" else ("headers",))
        out: dict[str, list[str]] = {key: [] for key in keys}
        if row.secret_encrypted is None:
            return out
        try:
            secrets = self._decrypt(row)
        except ConfigError:
            return out
        for key in out:
            out[key] = sorted(secrets.get(key) or {})
        return out

    def delete(self, name: str) -> None:
        with self._db.session() as session:
            row = session.scalar(select(McpServer).where(McpServer.name == name))
            if row is None:
                raise UnknownMcpServer(name)
            session.delete(row)

    def _decrypt(self, row: McpServer) -> dict[str, dict[str, str]]:
        if row.secret_encrypted is None:
            return {}
        from cryptography.fernet import InvalidToken  # only when a stored server has secrets

        try:
            plain = fernet_for(self._settings.secret_key).decrypt(row.secret_encrypted)
        except InvalidToken as exc:
            raise ConfigError(f"the secrets of MCP server {row.name!r} cannot be decrypted "
                              "with this STUDIO_SECRET_KEY") from exc
        data = json.loads(plain)
        return data if isinstance(data, dict) else {}

    def resolve(self, names: Sequence[str]) -> McpConfig:
        """The named servers, secrets decrypted, for one run; ``unknown_mcp_server`` (a
        :class:`ConfigError`) for a name not stored or disabled."""
        servers: dict[str, StdioServerConfig | HttpServerConfig] = {}
        with self._db.session() as session:
            rows = {row.name: row for row in session.scalars(
                select(McpServer).where(McpServer.name.in_(list(names))))}
        for name in names:
            row = rows.get(name)
            if row is None or not row.enabled:
                raise ConfigError(f"MCP server {name!r} is not stored",
                                  code=ErrorCode.UNKNOWN_MCP_SERVER, details={"name": name})
            data = {**dict(row.config or {}), **self._decrypt(row)}
            servers[name] = _SERVER.validate_python(data)
        return McpConfig(servers=servers)


def secret_values(config: McpConfig) -> list[str]:
    """Every ``env``/``headers`` value of ``config`` (for the redactor of the run using it)."""
    values: list[str] = []
    for server in config.servers.values():
        mapping = server.env if isinstance(server, StdioServerConfig) else server.headers
        values.extend(v for v in mapping.values() if v)
    return values
