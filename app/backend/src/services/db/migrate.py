"""Alembic, driven from code: the scripts live in the top-level ``migrations/`` directory.

The directory is found relative to this source tree (``app/backend/src/services/db`` ->
the repository root), which works for an editable install of a checkout; ``STUDIO_MIGRATIONS_DIR``
points elsewhere (a container image that copies ``migrations/``, say).
"""

from __future__ import annotations

import ast
from contextlib import suppress
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import SQLAlchemyError

from services.execution.errors import ConfigError
from services.settings import get_settings

if TYPE_CHECKING:  # Alembic (and Mako, Pygments: about 0.3 s) is imported when it is used
    from alembic.config import Config

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
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(migrations_dir()))
    if engine is not None:
        config.attributes["engine"] = engine
    return config


def head_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    return set(ScriptDirectory.from_config(alembic_config()).get_heads())


def current_revisions(engine: Engine) -> set[str]:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return set(MigrationContext.configure(connection).get_current_heads())


def upgrade(engine: Engine, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(engine), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    from alembic import command

    command.downgrade(alembic_config(engine), revision)


def differences(engine: Engine) -> list[Any]:
    """What autogenerate would change to make the database match the models (empty when none)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from services.db import models  # noqa: F401
    from services.db.base import Base  # the metadata with every table registered

    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        return list(compare_metadata(context, Base.metadata))


def is_current(engine: Engine) -> bool:
    """Whether the database is at the head revision, told without Alembic: the scripts'
    ``revision`` and ``down_revision`` assignments read as literals, the ``alembic_version``
    table read with one ``SELECT``. False whenever that is not certain (a script written
    differently, no version table, an error): the caller then asks Alembic itself. Every
    ``studio`` process opening the database checks this; most find it current."""
    heads = _script_heads()
    if heads is None:
        return False
    try:
        # a deferred transaction (``studio_read_only``, see services.db.session): on SQLite a
        # WAL reader neither waits for a writer nor blocks one, so a process opening a busy
        # database does not queue for the write lock (up to the busy timeout) to read this
        with engine.execution_options(studio_read_only=True).connect() as connection:
            current = {str(row[0]) for row in
                       connection.execute(text("SELECT version_num FROM alembic_version"))}
    except SQLAlchemyError:
        return False
    return current == heads


def _script_heads() -> set[str] | None:
    """The head revisions of the migration scripts: the revisions no script names as its
    ``down_revision``; None if a script does not declare both as literals."""
    try:
        versions = migrations_dir() / "versions"
        heads = heads_in(versions, versions.stat().st_mtime_ns)
    except (OSError, ConfigError):
        return None
    return set(heads) if heads is not None else None


def warm_script_heads() -> None:
    """Read the default scripts' heads once (a worker's fork server: its children, forked
    afterwards, find them read)."""
    versions = REPO_ROOT / "migrations" / "versions"
    with suppress(OSError):
        heads_in(versions, versions.stat().st_mtime_ns)


@lru_cache(maxsize=8)
def heads_in(versions: Path, mtime_ns: int) -> frozenset[str] | None:
    """The heads of the scripts in ``versions`` as they were at ``mtime_ns`` (the directory's
    modification time: a script added or removed changes it)."""
    revisions: set[str] = set()
    parents: set[str] = set()
    try:
        scripts = sorted(versions.glob("*.py"))
        for path in scripts:
            found = _declared(ast.parse(path.read_text(encoding="utf-8")))
            if found is None:
                return None
            revision, down = found
            revisions.add(revision)
            parents.update(down)
    except (OSError, SyntaxError, ValueError, ConfigError):
        return None
    heads = revisions - parents
    return frozenset(heads) or None


def _declared(module: ast.Module) -> tuple[str, set[str]] | None:
    values: dict[str, Any] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in ("revision", "down_revision"):
            values[target.id] = ast.literal_eval(value)
    revision, down = values.get("revision"), values.get("down_revision", ...)
    if not isinstance(revision, str) or down is ...:
        return None
    if down is None:
        return revision, set()
    if isinstance(down, str):
        return revision, {down}
    if isinstance(down, tuple | list) and all(isinstance(d, str) for d in down):
        return revision, set(down)
    return None
