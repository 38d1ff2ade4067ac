"""``studio eval``: run a suite (or SWE-bench JSONL) over a matrix, show a run, compare two.

``studio eval run SUITE`` records an eval run, prints its id on stderr first (run the same
command with ``--id ID`` to resume it after the process was killed: finished tasks are not run
again), runs every task as an execution (through the worker when a broker is configured, as a
``studio execute`` child otherwise), grades it and prints the table (``--json``: the report as
one JSON document). ``studio eval show ID`` prints a run as a table, JSON, Markdown or an HTML
page. ``studio eval compare BASE NEW --gate`` exits 1 when the new run is worse (see
:mod:`services.evals.compare`): a CI status check. Usage and suite errors exit 2.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

if TYPE_CHECKING:
    from services.db.session import Database
    from services.evals.summary import RunSummary

app = typer.Typer(help="Evaluate the agent: suites, SWE-bench instances, comparisons, the gate.",
                  no_args_is_help=True)

RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,35}$")
FORMATS = ("table", "json", "markdown", "html")


def _fail(message: str) -> NoReturn:
    typer.echo(f"studio eval: {message}", err=True)
    raise typer.Exit(2)


@app.command("run")
def run_command(
    suite: Annotated[str, typer.Argument(help="A suite directory, a .jsonl file, or builtin.")],
    provider: Annotated[list[str] | None, typer.Option(
        help="Providers, comma-separated or repeated (default: replay).")] = None,
    model: Annotated[list[str] | None, typer.Option(
        help="Models (MODEL for every provider, PROVIDER:MODEL for one).")] = None,
    role: Annotated[list[str] | None, typer.Option(help="Roles, comma-separated.")] = None,
    repeat: Annotated[int, typer.Option(help="Runs of each task per cell.")] = 1,
    concurrency: Annotated[int, typer.Option(min=1, max=64, help="Tasks at a time.")] = 2,
    run_id: Annotated[str | None, typer.Option(
        "--id", help="The eval run's id: an existing one is resumed.")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
    team: Annotated[str | None, typer.Option(
        "--team", help="The team the run and its executions belong to (default: 'default'; "
                       "a resumed run keeps its own).")] = None,
) -> None:
    """Run every task of SUITE in every matrix cell as an execution, grade it, report."""
    from services.cli.database import open_db
    from services.db.teams import TeamStore, UnknownTeam
    from services.evals.errors import EvalError
    from services.evals.matrix import build_matrix
    from services.evals.runner import EvalRunner, RunnerOptions
    from services.evals.suite import load_suite
    from services.settings import get_settings
    from services.worker.dispatch import dispatch_execution

    if run_id is not None and not RUN_ID.match(run_id):
        _fail("--id is 1-36 letters, digits, '.', '_' or '-'")
    settings = get_settings()
    db = open_db()
    try:
        try:
            team_id = None if team is None else TeamStore(db).id_of(team)
        except UnknownTeam as exc:
            _fail(str(exc))
        loaded = load_suite(suite)
        matrix = build_matrix(provider, model, role, repeat)
        runner = EvalRunner(db, settings, lambda eid: dispatch_execution(eid, settings),
                            RunnerOptions(concurrency=concurrency,
                                          on_graded=lambda key, grade: typer.echo(
                                              f"graded {key.task_id} [{key.cell} #{key.repeat}]"
                                              f": {'resolved' if grade.resolved else 'unresolved'}",
                                              err=True)), team_id)
        eval_id = runner.start(loaded, matrix, run_id)
        typer.echo(f"studio eval: run {eval_id} ({len(loaded.tasks)} tasks x "
                   f"{len(matrix.cells)} cells x {matrix.repeat})", err=True)
        with _stdout_to_stderr():  # the executions' live output is not the report
            runner.run(eval_id, loaded)
        _print(db, eval_id, "json" if json_output else "table")
    except EvalError as exc:
        _fail(str(exc))
    finally:
        db.dispose()


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """File descriptor 1 points at stderr meanwhile (children inherit it)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _summary(db: Database, eval_id: str) -> RunSummary:
    from services.evals.errors import EvalError
    from services.evals.summary import summarize

    try:
        return summarize(db, eval_id)
    except EvalError as exc:
        _fail(str(exc))


def _print(db: Database, eval_id: str, output: str) -> None:
    from services.evals.reports import html_report, markdown_report, text_report

    summary = _summary(db, eval_id)
    if output == "json":
        typer.echo(json.dumps(summary.as_json(), indent=2))
    elif output == "markdown":
        typer.echo(markdown_report(summary), nl=False)
    elif output == "html":
        typer.echo(html_report(summary), nl=False)
    else:
        typer.echo(text_report(summary), nl=False)


@app.command("show")
def show_command(
    eval_id: Annotated[str, typer.Argument(metavar="ID")],
    output: Annotated[str, typer.Option("--format", help="table | json | markdown | html")
                      ] = "table",
    out: Annotated[Path | None, typer.Option("--out", help="Write to this file.")] = None,
) -> None:
    """Show an eval run: the matrix (pass rate, 95% interval, cost per resolved task), tasks."""
    from services.cli.database import open_db

    if output not in FORMATS:
        _fail(f"--format is one of {', '.join(FORMATS)}")
    db = open_db()
    try:
        if out is None:
            _print(db, eval_id, output)
            return
        from services.evals.reports import html_report, markdown_report, text_report

        summary = _summary(db, eval_id)
        render = {"json": lambda s: json.dumps(s.as_json(), indent=2) + "\n",
                  "markdown": markdown_report, "html": html_report, "table": text_report}
        out.write_text(render[output](summary))
    finally:
        db.dispose()


@app.command("compare")
def compare_command(
    base: Annotated[str, typer.Argument(metavar="BASE")],
    new: Annotated[str, typer.Argument(metavar="NEW")],
    gate: Annotated[bool, typer.Option("--gate", help="Exit 1 when the gate fails.")] = False,
    max_drop: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Pass-rate drop tolerated (a fraction).")] = 0.0,
    alpha: Annotated[float, typer.Option(
        min=0.0, max=1.0, help="Significance of the paired (exact McNemar) test.")] = 0.05,
    max_cost_increase: Annotated[float, typer.Option(
        min=0.0, help="Rise of the cost per task tolerated (a fraction).")] = 0.25,
) -> None:
    """Compare two eval runs over their common tasks; with --gate, exit 1 when NEW is worse."""
    from services.cli.database import open_db
    from services.evals.compare import GateRules, compare, comparison_text

    db = open_db()
    try:
        base_summary, new_summary = _summary(db, base), _summary(db, new)
    finally:
        db.dispose()
    result = compare(base_summary, new_summary, GateRules(max_drop, alpha, max_cost_increase))
    typer.echo(comparison_text(base_summary, new_summary, result), nl=False)
    raise typer.Exit(1 if gate and not result.passed else 0)


@app.command("list")
def list_command() -> None:
    """The latest eval runs."""
    from services.cli.database import open_db
    from services.db.evals import EvalRepository

    db = open_db()
    try:
        for run in EvalRepository(db).runs():
            typer.echo(f"{run.id}  {run.status:9}  {run.created_at:%Y-%m-%d %H:%M}  {run.suite}")
    finally:
        db.dispose()
