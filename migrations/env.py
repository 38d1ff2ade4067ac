"""Alembic environment for the studio database.

Run through ``studio db upgrade`` (which hands over its engine in ``config.attributes``) or plain
``alembic`` from the repository root (``alembic.ini``), which reads ``STUDIO_DATABASE_URL``.
"""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Engine
from sqlalchemy.types import TypeDecorator

from services.db import models  # noqa: F401  (registers every table on the metadata)
from services.db.base import Base
from services.db.session import create_db_engine, resolve_url
from services.settings import StudioSettings

config = context.config
target_metadata = Base.metadata


def render_item(kind: str, obj: Any, autogen: AutogenContext) -> str | Literal[False]:
    """Render our column types by their plain SQLAlchemy type (scripts import no app code)."""
    if kind == "type" and isinstance(obj, TypeDecorator):
        return f"sa.{obj.impl!r}"
    return False


def _engine() -> tuple[Engine, bool]:
    given = config.attributes.get("engine")
    if given is not None:
        return given, False
    return create_db_engine(resolve_url(StudioSettings())), True


def run_migrations_offline() -> None:
    context.configure(
        url=resolve_url(StudioSettings()),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine, owned = _engine()
    try:
        with engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                compare_type=True,
                render_item=render_item,
                render_as_batch=connection.dialect.name == "sqlite",
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        if owned:
            engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
