"""``studio api``: serve the HTTP API (and the run-viewer page) with uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer


def api_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the HTTP API; the listening address is printed on stderr once bound."""
    import uvicorn  # FastAPI, uvicorn and the database: only for this command

    from services.api.app import create_app
    from services.cli.database import open_db
    from services.settings import get_settings

    app = create_app(get_settings(), db=open_db())
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=5, lifespan="on")
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise typer.Exit(1)
