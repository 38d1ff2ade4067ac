"""Alembic, driven from code: the scripts live in the top-level ``migrations/`` directory.

The directory is found relative to this source tree (``app/backend/src/services/db`` ->
the repository root), which works for an editable install of a checkout; ``STUDIO_MIGRATIONS_DIR``
points elsewhere (a container image that copies ``migrations/``, say).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from services.execution.errors import ConfigError
from services.settings import get_settings

REPO_ROOT = Path(__file__).resolve().parents[5]


def migrations_dir() -> Path:
    """Where ``env.py`` and ``versions/`` are."""
    configured = get_settings().migrations_dir
    path = configured if configured is not None else REPO_ROOT / "migrations"
    if not (path / "env.py").is_file():
        raise ConfigError(
            f"no Alembic migrations at {path}; set STUDIO_MIGRATIONS_DIR to the `migrations/` "
            "directory of the studio source tree"
        )
    return path


def alembic_config(engine: Engine | None = None) -> Config:
    """A programmatic Alembic config; ``env.py`` uses ``engine`` when one is given."""
    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def head_revisions() -> set[str]:
    return set(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(engine: Engine) -> set[str]:
    with engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())


def upgrade(engine: Engine, revision: str = "head") -> None:
    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    command.downgrade(alembic_config(engine), revision)


def differences(engine: Engine) -> list[Any]:
    """What autogenerate would change to make the database match the models (empty when none)."""
    from services.db import models  # noqa: F401
    from services.db.base import Base  # the metadata with every table registered

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))
