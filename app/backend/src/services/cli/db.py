"""``studio db upgrade``: migrate the configured database to the newest revision."""

from __future__ import annotations

import json

import typer

app = typer.Typer(help="Database schema.", no_args_is_help=True)


@app.command("upgrade")
def upgrade(revision: str = typer.Argument("head", help="Target revision.")) -> None:
    """Apply the Alembic migrations (PostgreSQL; SQLite is migrated on open anyway)."""
    from services.cli.database import open_db
    from services.db import migrate  # Alembic and SQLAlchemy: only for this command

    db = open_db(check=False)
    try:
        before = sorted(migrate.current_revisions(db.engine))
        migrate.upgrade(db.engine, revision)
        after = sorted(migrate.current_revisions(db.engine))
    finally:
        db.dispose()
    typer.echo(f"database at {', '.join(after) or 'base'} (was {', '.join(before) or 'base'})",
               err=True)
    typer.echo(json.dumps({"before": before, "after": after}, separators=(",", ":")))
