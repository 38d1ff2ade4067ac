"""Opening the database from a command: configuration errors become a message and exit 2.

SQLAlchemy is imported when a command opens the database, not when the CLI starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from services.db.session import Database


def open_db(*, check: bool = True) -> Database:
    """The configured database (an embedded SQLite one is migrated on the way)."""
    from services.db.session import open_database  # SQLAlchemy: only for commands that use it
    from services.execution.errors import ConfigError
    from services.settings import get_settings

    try:
        return open_database(get_settings(), check=check)
    except ConfigError as exc:
        typer.echo(f"studio: {exc.message}", err=True)
        raise typer.Exit(2) from exc
