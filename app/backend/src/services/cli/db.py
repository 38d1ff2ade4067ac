"""``studio db upgrade``: migrate the configured database to the newest revision;
``studio db prune``: delete finished executions older than the retention."""

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


@app.command("prune")
def prune(
    older_than_days: int | None = typer.Option(
        None, "--older-than-days", min=1, max=36_500,
        help="Delete executions finished more than this many days ago "
             "(default: STUDIO_RETENTION_DAYS)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Count, delete nothing."),
) -> None:
    """Delete finished executions older than the retention, with their journal, tool-call
    evidence, checkpoints and stored blobs; running ones are never touched."""
    from services.cli.database import open_db
    from services.db.retention import prune_finished
    from services.settings import get_settings

    days = older_than_days if older_than_days is not None else get_settings().retention_days
    if days is None:
        typer.echo("studio: no retention: pass --older-than-days or set STUDIO_RETENTION_DAYS",
                   err=True)
        typer.echo(json.dumps({"error": {"code": "config_error",
                                         "message": "no retention configured"}}))
        raise typer.Exit(2)
    db = open_db()
    try:
        result = prune_finished(db, days, dry_run=dry_run)
    finally:
        db.dispose()
    verb = "would delete" if result.dry_run else "deleted"
    typer.echo(f"{verb} {result.executions} executions finished before "
               f"{result.cutoff.isoformat()}", err=True)
    typer.echo(json.dumps({"executions": result.executions, "older_than_days": days,
                           "cutoff": result.cutoff.isoformat(), "dry_run": result.dry_run},
                          separators=(",", ":")))
