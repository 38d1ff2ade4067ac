"""Entry point of the ``studio`` console script.

Sub-commands live in one module each; :data:`COMMANDS` names them for :data:`app`, which imports
only the one that runs (:mod:`services.cli.lazy_group`). Machine output goes to stdout, progress
and diagnostics to stderr.
"""

from __future__ import annotations

import errno
import gc
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TextIO, cast

import typer

# typer 0.29 ships its own copy of click; its exceptions are the ones raised here.
from typer._click import exceptions as click_errors

from services.cli.config_errors import (
    EXIT_CONFIG,
    EXIT_DATABASE_LOST,
    config_error_line,
    database_fault_line,
)
from services.cli.lazy_group import CommandEntry, LazyGroup

if TYPE_CHECKING:
    from services.settings import StudioSettings

# Every command, in the order of the help page (the commands, then the command groups), with the
# first paragraph of its help; its module is imported only when it runs (services.cli.lazy_group).
COMMANDS = (
    CommandEntry("run", "services.cli.run:run_command",
                 "Run the agent loop on a directory or a repository; every run is recorded as an "
                 "execution."),
    CommandEntry("demo", "services.cli.demo:demo_command",
                 "Run the whole pipeline on a generated sample repository (replay provider, no API "
                 "key)."),
    CommandEntry("execute", "services.cli.execute:execute_command",
                 "Run (or resume) a recorded execution to its end: lease, workspace, loop, push, "
                 "PR."),
    CommandEntry("review", "services.cli.review:review_command",
                 "Review a pull request (read-only) and post one GitHub review with inline "
                 "comments."),
    CommandEntry("flowchart-node", "services.cli.flowchart_node:flowchart_node_command",
                 "Run one work node of a flowchart run (the API's child process when there is no "
                 "broker).", hidden=True),
    CommandEntry("killswitch", "services.cli.runtime_settings:killswitch",
                 "Engage (on) or release (off) the kill switch: running executions pause before "
                 "their next\ncall (queued again) and nothing new starts; released, they resume "
                 "where they were."),
    CommandEntry("providers", "services.cli.providers:providers_command",
                 "Print the capability matrix of every provider (and where each guard acts for "
                 "it) for both\nruntimes, the SDK loop and the legacy agent CLIs, and the command "
                 "sandbox (a loud warning on\nstderr when commands run unconfined)."),
    CommandEntry("api", "services.cli.api:api_command",
                 "Serve the HTTP API; the listening address is printed on stderr once bound."),
    CommandEntry("worker", "services.cli.worker:worker_command",
                 "Consume node executions from STUDIO_BROKER_URL; each runs as `studio execute "
                 "ID`."),
    CommandEntry("reaper", "services.cli.worker:reaper_command",
                 "Only the lease reaper: re-dispatch executions whose lease expired (no task "
                 "consumed)."),
    CommandEntry("tools", "services.cli.tools:app", "List and call the tool domains directly."),
    CommandEntry("db", "services.cli.db:app", "Database schema."),
    CommandEntry("settings", "services.cli.runtime_settings:app",
                 "Runtime settings, read fresh by running executions."),
    CommandEntry("integrations", "services.cli.integrations:app", "External services (GitHub)."),
    CommandEntry("executions", "services.cli.executions:app",
                 "Node executions and their evidence."),
    CommandEntry("mcp", "services.cli.mcp:app",
                 "Stored MCP servers (per agent node: mcp_servers)."),
    CommandEntry("tokens", "services.cli.tokens:app",
                 "API tokens (bearer, scoped: read, run, approve, admin; of a team or "
                 "deployment-wide)."),
    CommandEntry("triggers", "services.cli.triggers:app",
                 "GitHub triggers: issues and comments that start work."),
    CommandEntry("teams", "services.cli.teams:app",
                 "Teams: budgets, repositories, the month's spend."),
    CommandEntry("eval", "services.cli.evals:app",
                 "Evaluate the agent: suites, SWE-bench instances, comparisons, the gate."),
)


class StudioCommands(LazyGroup):
    entries = COMMANDS


def _no_common_options() -> None:
    """The group's own callback: ``studio`` has no options before the command (typer builds a
    command group only for an application with a callback or several registered commands)."""


app = typer.Typer(
    name="studio",
    help="Studio backend: run coding agents on repositories, confined and recorded.",
    cls=StudioCommands,
    callback=_no_common_options,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# The command lines that only print the top-level help page (``studio`` alone prints it too, and
# exits 2): the page is drawn from COMMANDS, it reads no setting.
TOP_LEVEL_HELP: tuple[list[str], ...] = ([], ["--help"])


def validate_settings() -> None:
    """Read and validate the ``STUDIO_*`` settings, then log at their level; a variable whose
    value does not validate is one line on stderr and exit 2 (:data:`EXIT_CONFIG`)."""
    from pydantic import ValidationError

    from services.cli.config_errors import settings_error_line
    from services.logs import configure_logging
    from services.settings import get_settings

    try:
        configure_logging(get_settings().log_level)
    except ValidationError as exc:  # a STUDIO_* variable with a value that cannot be
        print(settings_error_line(exc), file=sys.stderr)
        sys.exit(EXIT_CONFIG)


def validated_settings() -> StudioSettings | None:
    """The settings :func:`validate_settings` read, or ``None`` when it did not run (the
    top-level help page, which imports no setting)."""
    if "services.settings" not in sys.modules:
        return None
    from services.settings import get_settings

    return get_settings()


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; usage errors of ``tools call`` are answered with an envelope on stdout.

    Every command validates the settings before its arguments are parsed
    (:func:`validate_settings`), its own ``--help`` included; the top-level help page
    (:data:`TOP_LEVEL_HELP`) does not: it lists the commands from :data:`COMMANDS`, reads no
    setting, and is shown even when a ``STUDIO_*`` variable is invalid (the first command then
    names it), without importing pydantic.

    Without ``argv`` (the ``studio`` program itself), the start-up heap is frozen once the
    settings are validated (:func:`gc.freeze`; before the top-level page, which reads none): the
    modules and classes imported to start live as long as the process, so the collector does not
    walk them again, in any later full collection nor in the last one at exit (about 30 ms of
    ``studio --help``). What the command itself allocates is collected as before. Called with
    ``argv`` (tests, in their own process), nothing is frozen."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in TOP_LEVEL_HELP:
        validate_settings()
    if argv is None:
        gc.freeze()
    _run(args, lambda: app(args=args, prog_name="studio", standalone_mode=False))


def execute_main(execution_id: str) -> None:
    """``main(["execute", execution_id])`` without the command line: what a child forked by a
    worker's fork server runs (:mod:`services.cli.fork_server`). The same settings check, the
    same command with its defaults (no ``--keep-workspace``, no ``--json``) and the same exit
    statuses and error lines, minus typer building the ``studio`` group and parsing a command
    line that is always the same: in a forked child that code copies about 2 MB of the fork
    server's pages per execution (:doc:`benchmarks`)."""
    validate_settings()
    from services.cli.execute import execute_command

    args = ["execute", execution_id]
    _run(args, lambda: _as_typer_runs(lambda: execute_command(execution_id)))


def _as_typer_runs(command: Callable[[], object]) -> object:
    """Run ``command`` as typer runs a command's callback with ``standalone_mode=False``: an
    ``Exit`` it raises is its return code, ``KeyboardInterrupt`` is 130, ``EOFError`` an abort,
    a broken pipe on the output exit 1 (``typer.core._main``)."""
    try:
        try:
            return command()
        except EOFError as exc:
            print(file=sys.stderr)
            raise typer.Abort from exc
        except KeyboardInterrupt as exc:
            raise typer.Exit(130) from exc
        except OSError as exc:
            if exc.errno != errno.EPIPE:
                raise
            from typer._click.utils import PacifyFlushWrapper

            sys.stdout = cast(TextIO, PacifyFlushWrapper(sys.stdout))
            sys.stderr = cast(TextIO, PacifyFlushWrapper(sys.stderr))
            sys.exit(1)
    except typer.Exit as exc:
        return exc.exit_code


def _run(args: list[str], invoke: Callable[[], object]) -> None:
    """Exit with what ``invoke`` (the command line ``args``) returns, its errors mapped to the
    statuses and one-line messages of :func:`main`."""
    try:
        code = invoke()
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        sys.exit(130)
    except click_errors.UsageError as exc:
        if args[:2] == ["tools", "call"]:
            from services.cli import tools

            tools.print_usage_error(args[2:], exc.format_message())
            sys.exit(2)
        exc.show()
        sys.exit(2)
    except click_errors.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # a database or broker URL that does not work: one line, exit 2
        settings = validated_settings()
        fault = database_fault_line(exc, settings)  # a database lost while running
        if fault is not None:
            print(fault, file=sys.stderr)
            sys.exit(EXIT_DATABASE_LOST)
        line = config_error_line(exc, settings)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EXIT_CONFIG)
    sys.exit(code if isinstance(code, int) else 0)
