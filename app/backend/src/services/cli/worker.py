"""``studio worker``: a Celery worker for node executions, with the lease reaper."""

from __future__ import annotations

from typing import Annotated

import typer

from services.execution.errors import ConfigError
from services.settings import get_settings


def worker_command(
    concurrency: Annotated[int, typer.Option(min=1, help="Executions run at once.")] = 2,
    reaper: Annotated[bool, typer.Option(
        "--reaper/--no-reaper", help="Re-dispatch executions whose lease expired.")] = True,
    loglevel: Annotated[str, typer.Option(help="Celery log level.")] = "INFO",
    metrics_port: Annotated[int | None, typer.Option(
        min=0, max=65535,
        help="Serve Prometheus metrics of the worker and its executions on this port.")] = None,
) -> None:
    """Consume node executions from STUDIO_BROKER_URL; each runs as `studio execute ID`."""
    from services.cli.telemetry import shared_metrics_dir, start_tracing

    if metrics_port is not None:  # before anything records: the pool and children inherit it
        from services.telemetry.metrics import serve

        serve(metrics_port, shared_metrics_dir())
    if start_tracing("studio-worker"):
        from services.telemetry.instrumentation import instrument_celery

        instrument_celery()
    from services.worker.runner import run_worker  # imports celery: only for this command

    try:
        run_worker(get_settings(), concurrency=concurrency, reaper=reaper, loglevel=loglevel)
    except ConfigError as exc:
        typer.echo(f"studio worker: {exc.message}", err=True)
        raise typer.Exit(2) from exc


def reaper_command(
    loglevel: Annotated[str, typer.Option(help="Log level.")] = "INFO",
    metrics_port: Annotated[int | None, typer.Option(
        min=0, max=65535,
        help="Serve Prometheus metrics (lease expirations, re-dispatches) on this port.")] = None,
) -> None:
    """Only the lease reaper: re-dispatch executions whose lease expired (no task consumed).

    What the Helm chart's reaper Deployment runs, so that workers can run with --no-reaper.
    """
    from services.cli.telemetry import start_tracing

    if metrics_port is not None:
        from services.settings import metrics_multiprocess_dir
        from services.telemetry.metrics import serve

        serve(metrics_port, metrics_multiprocess_dir())
    if start_tracing("studio-reaper"):
        from services.telemetry.instrumentation import instrument_celery

        instrument_celery()
    from services.worker.runner import run_reaper  # imports celery: only for this command

    try:
        run_reaper(get_settings(), loglevel=loglevel)
    except ConfigError as exc:
        typer.echo(f"studio reaper: {exc.message}", err=True)
        raise typer.Exit(2) from exc
