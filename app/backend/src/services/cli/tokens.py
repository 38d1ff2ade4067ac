"""``studio tokens create``: a bearer token for the HTTP API (shown once, stored hashed)."""

from __future__ import annotations

from typing import Annotated

import typer

from services.cli.database import open_db

app = typer.Typer(help="API tokens (bearer, scoped: read, run, admin).", no_args_is_help=True)


@app.command("create")
def create(
    name: Annotated[str, typer.Option(help="Who or what the token is for.")],
    scopes: Annotated[str, typer.Option(help="Comma-separated: read,run,admin.")] = "read",
) -> None:
    """Create a token; it is printed once, alone on the last line of stdout."""
    from services.db.api_tokens import ApiTokenRepository, InvalidScopes

    db = open_db()
    try:
        token_id, token = ApiTokenRepository(db).create(name, scopes)
    except InvalidScopes as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    typer.echo(f"created token {token_id} ({name!r}, scopes {scopes}); it is shown only once",
               err=True)
    typer.echo(token)
