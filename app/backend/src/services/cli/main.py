"""Entry point of the ``studio`` console script.

Sub-commands live in one module each and register themselves on :data:`app` here. Machine output
goes to stdout, progress and diagnostics to stderr.
"""

from __future__ import annotations

import sys

import typer
from pydantic import ValidationError

# typer 0.29 ships its own copy of click; its exceptions are the ones raised here.
from typer._click import exceptions as click_errors

from services.cli import db, demo, executions, integrations, run, runtime_settings, tools
from services.cli import evals as evals_cli
from services.cli import mcp as mcp_cli
from services.cli.api import api_command
from services.cli.config_errors import (
    EXIT_CONFIG,
    EXIT_DATABASE_LOST,
    config_error_line,
    database_fault_line,
    settings_error_line,
)
from services.cli.execute import execute_command
from services.cli.flowchart_node import flowchart_node_command
from services.cli.providers import providers_command
from services.cli.review import review_command
from services.cli.teams import app as teams_app
from services.cli.tokens import app as tokens_app
from services.cli.triggers import app as triggers_app
from services.cli.worker import reaper_command, worker_command
from services.logs import configure_logging
from services.settings import get_settings

app = typer.Typer(
    name="studio",
    help="Studio backend: run coding agents on repositories, confined and recorded.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(tools.app, name="tools")
app.command("run")(run.run_command)
app.command("demo")(demo.demo_command)
app.command("execute")(execute_command)
app.command("review")(review_command)
app.command("flowchart-node", hidden=True)(flowchart_node_command)
app.add_typer(db.app, name="db")
app.add_typer(runtime_settings.app, name="settings")
app.command("killswitch")(runtime_settings.killswitch)
app.add_typer(integrations.app, name="integrations")
app.add_typer(executions.app, name="executions")
app.add_typer(mcp_cli.app, name="mcp")
app.command("providers")(providers_command)
app.command("api")(api_command)
app.add_typer(tokens_app, name="tokens")
app.add_typer(triggers_app, name="triggers")
app.add_typer(teams_app, name="teams")
app.command("worker")(worker_command)
app.command("reaper")(reaper_command)
app.add_typer(evals_cli.app, name="eval")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; usage errors of ``tools call`` are answered with an envelope on stdout."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        configure_logging(get_settings().log_level)
    except ValidationError as exc:  # a STUDIO_* variable with a value that cannot be
        print(settings_error_line(exc), file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    try:
        code = app(args=args, prog_name="studio", standalone_mode=False)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except click_errors.UsageError as exc:
        if args[:2] == ["tools", "call"]:
            tools.print_usage_error(args[2:], exc.format_message())
            sys.exit(2)
        exc.show()
        sys.exit(2)
    except click_errors.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # a database or broker URL that does not work: one line, exit 2
        fault = database_fault_line(exc, get_settings())  # a database lost while running
        if fault is not None:
            print(fault, file=sys.stderr)
            sys.exit(EXIT_DATABASE_LOST)
        line = config_error_line(exc, get_settings())
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    sys.exit(code if isinstance(code, int) else 0)
