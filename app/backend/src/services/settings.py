"""Deployment configuration: the only module that reads environment variables.

Values here are fixed for the life of a process (the sandbox mode above all). Runtime settings
that operators change while the system runs (kill switch, cutover, limits) live in the database.
"""

from __future__ import annotations

import os
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from platformdirs import user_data_dir
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class SandboxMode(StrEnum):
    AUTO = "auto"
    REQUIRED = "required"
    BWRAP = "bwrap"
    LANDLOCK = "landlock"
    NONE = "none"


class StudioSettings(BaseSettings):
    """``STUDIO_*`` environment variables."""

    model_config = SettingsConfigDict(env_prefix="STUDIO_", extra="ignore")

    sandbox: SandboxMode = SandboxMode.AUTO
    data_dir: Path = Field(default_factory=lambda: Path(user_data_dir("studio", appauthor=False)))
    database_url: SecretStr | None = None
    broker_url: SecretStr | None = None
    # The Celery queue node executions are sent to and workers consume (one per deployment).
    worker_queue: str = "studio"
    # Seconds before Redis hands a message its worker never acknowledged (killed) to another.
    broker_visibility_timeout_s: float = Field(default=300.0, gt=0)
    secret_key: SecretStr | None = None
    github_token: SecretStr | None = None
    github_api_url: str = "https://api.github.com"
    mcp_config: Path | None = None
    workspace_dir: Path | None = None
    log_level: str = "WARNING"  # STUDIO_LOG_LEVEL: INFO adds one line per tool call
    git_author_name: str = "Studio Agent"
    git_author_email: str = "studio-agent@localhost"
    # Alembic scripts; by default the top-level ``migrations/`` of the source checkout.
    migrations_dir: Path | None = None
    # Flowcharts: the most node executions (agent and command nodes) one run may start.
    flowchart_max_node_executions: int = Field(default=50, ge=1)
    # Origins allowed to call the HTTP API from a browser (CORS), comma-separated; none by default.
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)

    @field_validator("cors_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value


@lru_cache(maxsize=1)
def get_settings() -> StudioSettings:
    """The process-wide settings, read once."""
    return StudioSettings()


# Provider credentials read by the SDKs themselves; listed so that they can be redacted everywhere.
PROVIDER_SECRET_VARIABLES: tuple[str, ...] = (
    "OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_BEARER_TOKEN_BEDROCK",
)


def provider_secret_values() -> list[str]:
    """The values of the provider credentials present in the environment (for redaction)."""
    return [value for name in PROVIDER_SECRET_VARIABLES if (value := os.environ.get(name))]


def process_environment() -> dict[str, str]:
    """A copy of the process environment, for adapters that filter it through an allowlist."""
    return dict(os.environ)


def mcp_base_environment() -> dict[str, str]:
    """What a stdio MCP server inherits besides its configured env: the locale only."""
    return {name: value for name in ("LANG", "LC_ALL") if (value := os.environ.get(name))}
