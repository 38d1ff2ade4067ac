"""Operator state: runtime settings, integrations, MCP servers, the budget ledger, API tokens."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, BigInteger, Boolean, Date, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from services.db.base import Base, UTCDateTime, utcnow
from services.db.models.flowcharts import new_id
from services.db.models.team_owned import TeamOwned


class RuntimeSetting(Base):
    """A setting operators change while the system runs; ``value`` is JSON."""

    __tablename__ = "runtime_settings"

    key: Mapped[str] = mapped_column(String(128), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class Integration(Base):
    """An external service (``github``); the token is Fernet-encrypted and never printed."""

    __tablename__ = "integrations"

    kind: Mapped[str] = mapped_column(String(64), primary_key=True)
    api_url: Mapped[str | None] = mapped_column(Text)
    token_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
    # The git origins (``scheme://host[:port]``) the token may be sent to; ``None``: derived.
    git_origins: Mapped[list[str] | None] = mapped_column(JSON)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    def __repr__(self) -> str:
        token = "set" if self.token_encrypted else "unset"
        return f"Integration(kind={self.kind!r}, api_url={self.api_url!r}, token=<{token}>)"

    __str__ = __repr__


class McpServer(TeamOwned, Base):
    """A configured MCP server (``stdio`` or ``http``); secrets only in ``secret_encrypted``."""

    __tablename__ = "mcp_servers"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    transport: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    secret_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)

    def __repr__(self) -> str:
        return f"McpServer(name={self.name!r}, transport={self.transport!r})"


class BudgetLedger(Base):
    """Spend per repository and UTC day, in micro-dollars (exact integer arithmetic).

    ``spent_micros`` holds admitted charges and never exceeds the limit it was charged under;
    ``overflow_micros`` holds charges that arrived once the day's budget was full.
    """

    __tablename__ = "budget_ledger"

    repository: Mapped[str] = mapped_column(String(512), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    spent_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    overflow_micros: Mapped[int] = mapped_column(BigInteger, default=0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow)


class ApiToken(TeamOwned, Base):
    """A bearer token for the HTTP API; only its SHA-256 hash is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[str] = mapped_column(String(36), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(128), unique=True)
    scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    def __repr__(self) -> str:
        return f"ApiToken(name={self.name!r}, scopes={self.scopes!r})"
