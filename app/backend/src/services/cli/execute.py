"""``studio execute EXECUTION_ID``: claim, run or resume, and finalize one recorded execution.

The entrypoint of every substrate (a local subprocess, a Kubernetes Job). Exit codes: 0 when the
execution succeeded, or when there was nothing to do (a live lease held elsewhere, an execution
already finished, a lease taken over mid-run: the holder carries on); 1 when it ended in another
final status; 2 for an unknown id or a configuration error; 3 when it stopped itself because it
could not renew its lease in time (everything it started is killed first, before the lease can
expire and another attempt claim it); 4 when the database it had reached stayed unreachable
longer than it waits for it (``database connection lost during the run; retried N times``, see
:mod:`services.db.connection_loss`). ``--json`` prints one line last.
"""

from __future__ import annotations

import json
import logging
import os
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from services.runs.leases import Lease
    from services.runs.results import ExecutionOutcome

log = logging.getLogger(__name__)

EXIT_LEASE_LAPSED = 3


def stop_now(lease: Lease) -> None:
    """The lease could not be renewed: kill every process this one started, then exit at once
    (no cleanup, no further write: the next attempt starts from the last checkpoint)."""
    from services.executors.local import kill_descendants
    from services.telemetry import tracing

    log.error("execution %s: lease epoch %d lapsed; stopping", lease.execution_id, lease.epoch)
    kill_descendants(os.getpid())
    tracing.flush(1000)  # os._exit skips the exporter's own flush at exit
    os._exit(EXIT_LEASE_LAPSED)


def report(outcome: ExecutionOutcome, json_output: bool) -> None:
    """Print the outcome (a JSON line with ``--json``) and exit with its code."""
    if outcome.message:
        typer.echo(f"studio: {outcome.execution_id}: {outcome.message}", err=True)
    if json_output:
        typer.echo(json.dumps(outcome.summary(), separators=(",", ":")))
    elif outcome.run is not None:
        typer.echo(outcome.run.result.model_dump_json(indent=2))
    if outcome.state != "ran":
        raise typer.Exit(0)
    raise typer.Exit(0 if outcome.succeeded else 1)


def execute_command(
    execution_id: Annotated[str, typer.Argument(metavar="EXECUTION_ID")],
    keep_workspace: Annotated[bool, typer.Option(help="Keep the workspace afterwards.")] = False,
    json_output: Annotated[bool, typer.Option("--json", help="Print one JSON line last.")] = False,
) -> None:
    """Run (or resume) a recorded execution to its end: lease, workspace, loop, push, PR."""
    # The durable path (database, MCP bridge, providers) is imported when the command runs.
    from services.cli.database import open_db
    from services.cli.live import LiveConsoleSink
    from services.cli.telemetry import start_tracing
    from services.db.executions import UnknownExecution
    from services.execution.errors import ConfigError
    from services.runs.service import ExecutionService
    from services.settings import get_settings, inherited_trace_context
    from services.telemetry import tracing

    start_tracing("studio-execute")
    db = open_db()
    try:
        # under the span that started this process (TRACEPARENT): one trace per execution
        with tracing.inherited(inherited_trace_context()), tracing.span(
                "studio.execute", {"studio.execution_id": execution_id}):
            outcome = ExecutionService(db, get_settings()).execute_recorded(
                execution_id, sinks=[LiveConsoleSink()], keep_workspace=keep_workspace,
                on_lapse=stop_now)
    except UnknownExecution as exc:
        typer.echo(f"studio: {exc}", err=True)
        raise typer.Exit(2) from exc
    except ConfigError as exc:
        typer.echo(f"studio: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    finally:
        db.dispose()
    report(outcome, json_output)
