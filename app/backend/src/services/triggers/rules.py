"""A repository's trigger as operators set it (admin API, ``studio triggers set``): checked
here once for both.

The repository is ``owner/name``; ``repo_url`` must pass the same checks as a run's (its host
allowed, the token's origins); the provider must exist (and the replay provider needs its
script); limits are the runtime-setting limits, each within its bounds; the label, the
assignee's login and the command are short plain words.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.db.models import GithubTrigger
from services.db.runtime_settings import LIMIT_KEYS, InvalidSettingValue, checked, validate
from services.db.session import Database
from services.db.teams import owning_team
from services.db.triggers import TriggerStore
from services.execution.errors import ConfigError, ErrorCode
from services.execution.providers.profiles import provider_profile
from services.execution.providers.replay import load_script
from services.repos.access import check_new_execution
from services.settings import StudioSettings

REPOSITORY = r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$"
_WORD = re.compile(r"^[^\s<>`@]{1,50}$")


class TriggerConfig(BaseModel):
    """What starts work on a repository, and with which settings."""

    model_config = ConfigDict(extra="forbid")

    repo_url: str = Field(max_length=2000, description="The repository's clone URL.")
    label: str | None = Field(default="studio", description="Issue label that starts work.")
    assignee: str | None = Field(default=None, description="Login whose assignment starts work.")
    command: str = Field(default="/studio", description="What a follow-up comment starts with.")
    provider: str = Field(max_length=32)
    model: str | None = Field(default=None, max_length=200)
    limits: dict[str, Any] = Field(default_factory=dict,
                                   description=f"Per-run limits among {', '.join(LIMIT_KEYS)}.")
    replay_script: dict[str, Any] | None = Field(
        default=None, description="The replay provider's script (only for replay).")
    enabled: bool = True
    review: bool = Field(default=False, strict=True, description=(
        "A pull request opened, pushed to or reopened starts a review execution."))

    @field_validator("label", "assignee", "command")
    @classmethod
    def _word(cls, value: str | None) -> str | None:
        if value is not None and not _WORD.match(value):
            raise ValueError("1-50 characters, no spaces, '<', '>', '`' or '@'")
        return value


def _invalid(message: str, **details: Any) -> ConfigError:
    return ConfigError(message, code=ErrorCode.INVALID_ARGUMENTS, details=details)


def check(db: Database, settings: StudioSettings, repository: str,
          config: TriggerConfig) -> dict[str, Any]:
    """The stored fields of a valid trigger, or ``ConfigError`` (``invalid_arguments``,
    ``host_not_allowed``...)."""
    if not re.match(REPOSITORY, repository):
        raise _invalid("the repository is owner/name", field="repository")
    try:
        profile = provider_profile(config.provider)
    except ConfigError as exc:
        raise _invalid(exc.message, field="provider") from exc
    if profile.needs_script != (config.replay_script is not None):
        raise _invalid("replay_script is given exactly for the replay provider",
                       field="replay_script")
    if config.replay_script is not None:
        try:
            load_script(config.replay_script)
        except ConfigError as exc:
            raise _invalid(exc.message, field="replay_script") from exc
    limits = {}
    for key, value in config.limits.items():
        if key not in LIMIT_KEYS:
            raise _invalid(f"{key!r} is not a limit", field="limits", known=list(LIMIT_KEYS))
        try:
            limits[key] = checked(key, validate(key, value))
        except InvalidSettingValue as exc:
            raise _invalid(str(exc), field=f"limits.{key}") from exc
    check_new_execution(db, settings, config.repo_url, pull_request=True, allow_local=False)
    return {**config.model_dump(exclude={"limits"}), "limits": limits}


def put(db: Database, settings: StudioSettings, repository: str,
        config: TriggerConfig) -> GithubTrigger:
    """Store a valid trigger; it belongs to its repository's team (else ``default``), the
    team its executions get."""
    fields = check(db, settings, repository, config)
    return TriggerStore(db).put(repository, **fields,
                                team_id=owning_team(db, config.repo_url, None))


def described(row: GithubTrigger) -> dict[str, Any]:
    return {"repository": row.repository, "repo_url": row.repo_url, "label": row.label,
            "assignee": row.assignee, "command": row.command, "provider": row.provider,
            "model": row.model, "limits": dict(row.limits or {}),
            "replay_script": row.replay_script is not None, "enabled": row.enabled,
            "review": bool(row.review)}
