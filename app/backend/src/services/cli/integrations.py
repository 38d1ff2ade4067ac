"""``studio integrations set github`` and ``studio integrations show`` (tokens never printed)."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from typing import Annotated

import typer
from pydantic import SecretStr

from services.cli.database import open_db
from services.execution.errors import ConfigError
from services.settings import get_settings

app = typer.Typer(help="External services (GitHub).", no_args_is_help=True)


class Kind(StrEnum):
    GITHUB = "github"


def _read_token() -> SecretStr:
    token = sys.stdin.readline().strip()
    if not token:
        typer.echo("studio: no token on stdin", err=True)
        raise typer.Exit(2)
    return SecretStr(token)


@app.command("set")
def set_integration(
    kind: Annotated[Kind, typer.Argument(help="Integration kind.")],
    api_url: Annotated[str | None, typer.Option("--api-url", help="API base URL.")] = None,
    token_stdin: Annotated[
        bool, typer.Option("--token-stdin", help="Read the token from the first line of stdin.")
    ] = False,
    git_origins: Annotated[str | None, typer.Option(
        "--git-origins", help="Comma-separated scheme://host[:port] the token may be sent to "
        "(empty: derived from the API URL).")] = None,
    webhook_secret_stdin: Annotated[bool, typer.Option(
        "--webhook-secret-stdin", help="Read the webhook secret (what GitHub signs deliveries "
        "with) from the first line of stdin.")] = False,
) -> None:
    """Store the API URL, the git origins and, with --token-stdin, the token (encrypted with
    STUDIO_SECRET_KEY)."""
    if token_stdin and webhook_secret_stdin:
        typer.echo("studio: give --token-stdin and --webhook-secret-stdin one at a time",
                   err=True)
        raise typer.Exit(2)
    if api_url is None and not token_stdin and git_origins is None and not webhook_secret_stdin:
        typer.echo("studio: nothing to set; give --api-url, --git-origins and/or --token-stdin",
                   err=True)
        raise typer.Exit(2)
    from services.repos.integration_store import IntegrationStore

    token = _read_token() if token_stdin else None
    secret = _read_token() if webhook_secret_stdin else None
    settings = get_settings()
    db = open_db()
    try:
        repository = IntegrationStore(db, settings)
        origins = None if git_origins is None else [
            o for o in git_origins.split(",") if o.strip()]
        if api_url is not None or token is not None or origins is not None:
            repository.set_github(api_url=api_url, token=token, git_origins=origins)
        if secret is not None:
            repository.set_webhook_secret(secret)
        described = repository.describe()
    except ConfigError as exc:
        typer.echo(f"studio: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    typer.echo(f"{kind.value} integration saved", err=True)
    typer.echo(json.dumps(described[0], separators=(",", ":")))


@app.command("show")
def show() -> None:
    """Print each integration: API URL and whether a token is set (never the token)."""
    from services.repos.integration_store import IntegrationStore

    db = open_db()
    try:
        described = IntegrationStore(db, get_settings()).describe()
    except ConfigError as exc:  # e.g. a malformed STUDIO_GITHUB_GIT_ORIGINS
        typer.echo(f"studio: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    typer.echo(json.dumps(described, separators=(",", ":")))
