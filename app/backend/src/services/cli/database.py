"""Opening the database from a command: configuration errors become a message and exit 2."""

from __future__ import annotations

import typer

from services.db.session import Database, open_database
from services.execution.errors import ConfigError
from services.settings import get_settings


def open_db(*, check: bool = True) -> Database:
    """The configured database (an embedded SQLite one is migrated on the way)."""
    try:
        return open_database(get_settings(), check=check)
    except ConfigError as exc:
        typer.echo(f"studio: {exc.message}", err=True)
        raise typer.Exit(2) from exc
