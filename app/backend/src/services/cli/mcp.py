"""``studio mcp add|list|show|remove``: the stored MCP servers agent nodes name in
``mcp_servers`` (secrets never printed).

``add NAME --config FILE`` (``-``: stdin) reads one server in the shape of an entry of
``STUDIO_MCP_CONFIG``; its ``env`` and ``headers`` are stored encrypted with
``STUDIO_SECRET_KEY`` and shown afterwards only as the names of their keys. An HTTP URL
passes the repository host rules (``host_not_allowed``; ``STUDIO_REPO_ALLOWED_HOSTS`` lists the
internal hosts allowed) and holds no credential, query or fragment
(:mod:`services.runs.mcp_confinement`).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from services.cli.database import open_db
from services.settings import get_settings

app = typer.Typer(help="Stored MCP servers (per agent node: mcp_servers).", no_args_is_help=True)


def _fail(message: str, code: int = 1) -> NoReturn:
    typer.echo(f"studio mcp: {message}", err=True)
    raise typer.Exit(code)


def _read_config(source: str) -> Any:
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot read {source}: {exc.strerror}", 2)
    try:
        return json.loads(text)
    except ValueError as exc:
        _fail(f"{source} is not JSON: {exc}", 2)


def _print(value: Any) -> None:
    typer.echo(json.dumps(value, separators=(",", ":")))


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="1 to 20 of a-z A-Z 0-9 -")],
    config: Annotated[str, typer.Option(
        "--config", help='JSON file (or - for stdin): {"transport": "stdio", "command": ..., '
        '"args": [...], "env": {...}} or {"transport": "http", "url": ..., "headers": {...}}')],
) -> None:
    """Store an MCP server (env and headers encrypted)."""
    from services.db.mcp_servers import McpServerRepository
    from services.execution.errors import ConfigError
    from services.runs.mcp_confinement import check_stored_server

    data = _read_config(config)
    settings = get_settings()
    check = functools.partial(check_stored_server, settings, allow_loopback=False)
    db = open_db()
    try:
        _print(McpServerRepository(db, settings).create(name, data, check))
    except ConfigError as exc:
        _fail(f"{exc.code.value}: {exc.message}")
    finally:
        db.dispose()


@app.command("list")
def list_servers() -> None:
    """Every stored server, one JSON line (secret key names only)."""
    from services.db.mcp_servers import McpServerRepository

    db = open_db()
    try:
        _print(McpServerRepository(db, get_settings()).list_servers())
    finally:
        db.dispose()


@app.command("show")
def show(name: Annotated[str, typer.Argument()]) -> None:
    """One stored server (secret key names only)."""
    from services.db.errors import NotFound
    from services.db.mcp_servers import McpServerRepository

    db = open_db()
    try:
        _print(McpServerRepository(db, get_settings()).describe(name))
    except NotFound as exc:
        _fail(str(exc))
    finally:
        db.dispose()


@app.command("remove")
def remove(name: Annotated[str, typer.Argument()]) -> None:
    """Delete a stored server; agents naming it are refused from then on."""
    from services.db.errors import NotFound
    from services.db.mcp_servers import McpServerRepository

    db = open_db()
    try:
        McpServerRepository(db, get_settings()).delete(name)
    except NotFound as exc:
        _fail(str(exc))
    finally:
        db.dispose()
    typer.echo(f"removed {name}", err=True)
