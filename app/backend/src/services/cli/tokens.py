"""``studio tokens create``: a bearer token for the HTTP API (shown once, stored hashed)."""

from __future__ import annotations

from typing import Annotated

import typer

from services.cli.database import open_db

app = typer.Typer(help="API tokens (bearer, scoped: read, run, approve, admin; of a team or "
                       "deployment-wide).", no_args_is_help=True)


@app.command("create")
def create(
    name: Annotated[str, typer.Option(help="Who or what the token is for.")],
    scopes: Annotated[str, typer.Option(
        help="Comma-separated: read,run,approve,admin.")] = "read",
    team: Annotated[str | None, typer.Option(
        help="The team the token belongs to (it sees and spends only the team's); "
             "without it the token is deployment-wide.")] = None,
) -> None:
    """Create a token; it is printed once, alone on the last line of stdout."""
    from services.db.api_tokens import ApiTokenRepository, InvalidScopes
    from services.db.teams import TeamStore, UnknownTeam

    db = open_db()
    try:
        team_id = TeamStore(db).id_of(team) if team is not None else None
        token_id, token = ApiTokenRepository(db).create(name, scopes, team_id)
    except (InvalidScopes, UnknownTeam) as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    where = f"team {team}" if team is not None else "deployment-wide"
    typer.echo(f"created token {token_id} ({name!r}, scopes {scopes}, {where}); it is shown "
               "only once", err=True)
    typer.echo(token)
