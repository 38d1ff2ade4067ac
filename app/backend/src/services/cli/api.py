"""``studio api``: serve the HTTP API (and the run-viewer page) with uvicorn."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from services.api.dispatch import WorkDispatch
    from services.settings import StudioSettings


def api_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")] = 8000,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the HTTP API; the listening address is printed on stderr once bound."""
    import uvicorn  # FastAPI, uvicorn and the database: only for this command

    from services.api.app import create_app
    from services.cli.database import open_db
    from services.cli.telemetry import shared_metrics_dir, start_tracing
    from services.settings import get_settings
    from services.worker.names import broker_url

    shared_metrics_dir()  # with no broker, the executions' children record into it too
    if start_tracing("studio-api"):
        from services.telemetry.instrumentation import instrument_celery

        instrument_celery()  # the API's messages to the workers carry its trace context
    settings = get_settings()
    db = open_db()
    if broker_url(settings) is not None:  # a broker that cannot be reached: one line, exit 2
        from services.worker.dispatch import producer_app
        from services.worker.startup_checks import check_broker

        try:
            check_broker(producer_app(settings), settings)
        except BaseException:
            db.dispose()
            raise
    app = create_app(settings, db=db, dispatch=work_dispatch(settings))
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=5, lifespan="on")
    server = uvicorn.Server(config)
    server.run()
    if not server.started:
        raise typer.Exit(1)


def work_dispatch(settings: StudioSettings) -> WorkDispatch:
    """The API's dispatch port, made of the worker's dispatchers (the API never imports them).

    Without a broker the executions run from this process (the worker's handler starts their
    ``studio execute`` child) and each flowchart node in a child of the API: the worker's
    dispatch module, Celery with it, is imported when the first execution is dispatched, not
    when the API starts."""
    from functools import partial

    from services.api.dispatch import WorkDispatch
    from services.worker.names import broker_url

    if broker_url(settings) is None:
        return WorkDispatch(execution=partial(_dispatch_here, settings=settings),
                            brokered=False, flowchart_nodes=None, delivery=None)
    from services.worker.dispatch import dispatch_delivery, dispatch_or_defer
    from services.worker.flowchart_tasks import flowchart_dispatch

    return WorkDispatch(execution=lambda execution_id: dispatch_or_defer(execution_id, settings),
                        brokered=True, flowchart_nodes=flowchart_dispatch(settings),
                        delivery=partial(dispatch_delivery, settings=settings))


def _dispatch_here(execution_id: str, *, settings: StudioSettings) -> object:
    """:func:`services.worker.dispatch.dispatch_or_defer` without a broker, imported on the
    first call."""
    from services.worker.dispatch import dispatch_or_defer

    return dispatch_or_defer(execution_id, settings)
