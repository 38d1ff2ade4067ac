"""``execute_main``: what a forked ``studio execute`` runs, the command without its command line.

A child of the worker's fork server used to run ``main(["execute", ID])``: typer built the
``studio`` group and the ``execute`` command and parsed a command line that is always the same,
about 2 MB of the fork server's pages copied per execution (:doc:`benchmarks`, issue 39). It now
calls the command itself (:func:`services.cli.main.execute_main`), with the same settings check,
exit statuses and error lines. Each case runs in a subprocess (the settings and logging are
read once per process).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

UNKNOWN_ID = "00000000-0000-0000-0000-000000000000"

# runs one entry point, then prints its exit status and whether typer's command building was
# imported (it is what running the command line loads, and what execute_main spares)
RUN = """
import json, sys
from services.cli import main as cli
try:
    if sys.argv[1] == "main":
        cli.main(["execute", sys.argv[2]])
    else:
        cli.execute_main(sys.argv[2])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "typer_commands": "typer._adapters" in sys.modules}))
"""


def run(entry: str, env: dict[str, str], execution_id: str = UNKNOWN_ID) -> tuple[dict[str, object],
                                                                                   str]:
    done = subprocess.run([sys.executable, "-c", RUN, entry, execution_id], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    import os

    keep = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    return {**keep, "HOME": str(tmp_path), "STUDIO_DATA_DIR": str(tmp_path / "data"),
            "STUDIO_DATABASE_URL": f"sqlite:///{tmp_path / 'studio.db'}", **extra}


@pytest.mark.parametrize(("case", "extra", "command_ran"), [
    ("unknown execution", {}, True),
    ("a database URL that does not work", {"STUDIO_DATABASE_URL": "nosuchdriver://x/y"}, True),
    # refused before any command is built, by both
    ("a setting that does not validate", {"STUDIO_SANDBOX": "sideways"}, False),
])
def test_execute_main_answers_as_the_command_line_does(tmp_path: Path, case: str,
                                                       extra: dict[str, str],
                                                       command_ran: bool) -> None:
    """Same exit status, same stderr line, for each way ``studio execute`` ends before it runs
    anything; and only the command line imports typer's command building (the control that
    the probe sees it). Fails on main: there is no ``execute_main``."""
    env = environment(tmp_path, **extra)
    by_command_line, stderr_command_line = run("main", env)
    direct, stderr_direct = run("execute_main", env)
    assert direct["code"] == by_command_line["code"] == 2, case
    assert stderr_direct.strip().splitlines()[-1] == stderr_command_line.strip().splitlines()[-1]
    assert by_command_line["typer_commands"] is command_ran
    assert direct["typer_commands"] is False


def _exit_3() -> None:
    raise __import__("typer").Exit(3)


def _interrupted() -> None:
    raise KeyboardInterrupt


def _end_of_input() -> None:
    raise EOFError


def _returns() -> None:
    return None


@pytest.mark.parametrize("behaviour", [_exit_3, _interrupted, _end_of_input, _returns])
def test_a_command_ends_as_under_typer(behaviour: object) -> None:
    """``_as_typer_runs`` against typer itself (a one-command application, run as ``main`` runs
    the ``studio`` group: ``standalone_mode=False``): the same return value, or the same
    exception, for an ``Exit``, an interrupt, an end of input and a plain return."""
    import typer

    from services.cli.main import _as_typer_runs

    application = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    application.command()(behaviour)  # type: ignore[arg-type]

    def outcome(run: object) -> object:
        try:
            return ("returned", run())  # type: ignore[operator]
        except BaseException as exc:  # noqa: BLE001 - the exception is what is compared
            return ("raised", type(exc))

    expected = outcome(lambda: application(args=[], prog_name="studio", standalone_mode=False))
    assert outcome(lambda: _as_typer_runs(behaviour)) == expected  # type: ignore[arg-type]
