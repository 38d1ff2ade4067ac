"""Start time of the ``studio`` command line, next to ``python -c "import typer"`` in the same run.

Run from the repository root (about half a minute on 2 cores)::

    .venv/bin/python -m bench.cli_start
    .venv/bin/python bench/cli_start.py --reps 21

Measured, ``--reps`` times each after one warm-up, the commands interleaved (the order rotating
every repetition) so that all of them see the same machine load; wall time of the whole process,
medians reported:

- ``python -c "import typer"`` (the reference: the interpreter and the CLI library, nothing else);
- a two-command typer application asked for ``--help`` (for comparison, not a target: what
  typer's rich help page costs any typer program, on top of ``import typer``);
- ``studio --help``;
- ``studio tools list``;
- ``studio tools call workspace.list_dir --workspace DIR`` (a real call: settings, registry,
  sandbox selection, dispatcher, one envelope).

The commands run with bytecode writing on (``PYTHONDONTWRITEBYTECODE`` removed from their
environment), as an installed command does; the warm-up run writes the ``.pyc`` files.

Also reported: the median CPU time (user + system) of each process, which moves much less with the
machine's load than wall time and is close to what the wall time would be on an idle machine.

A controlled load (the machine is shared, so its own load is whatever the others run)::

    setsid sh -c 'echo -10 > /proc/self/autogroup
                  exec .venv/bin/python -m bench.cli_start --cpus 1 --hogs 1'

``--cpus`` pins the script and everything it starts to those CPUs, ``--hogs N`` keeps N
CPU-bound processes running there during the measurement: one hog on one CPU is what a load
average of 2 on 2 CPUs is to a command (it shares its CPU with one busy process). The session's
own scheduling group (``setsid`` and its ``/proc/self/autogroup`` nice, as root) keeps the other
users' processes off that CPU for the run.

Before and after in one run: ``--baseline SRC`` (the ``app/backend/src`` directory of another
checkout, e.g. ``git archive`` of main unpacked under /tmp) adds every ``studio`` command
again with ``SRC`` first on ``PYTHONPATH`` (same interpreter and packages, that tree's sources),
named ``before: ...``; they are interleaved with the others like any command::

    .venv/bin/python -m bench.cli_start --baseline /tmp/base-cli/app/backend/src
    .venv/bin/python -m bench.cli_start --commands database --reps 9 \
        --baseline /tmp/base-cli/app/backend/src

The database commands the test suite starts most (``--commands database``, or ``all``, the
default), each on an embedded SQLite database of the run's own (no broker) holding one replay
execution that the script records first:

- ``studio executions show ID --json``, ``executions list --json``, ``executions logs ID``;
- ``studio settings get max_iterations``, ``studio teams list --json``;
- ``studio executions deny ID APPROVAL`` (an approval that does not exist: the command loads
  what a real decision loads, then exits 1), ``studio killswitch off``;
- ``studio run --provider replay`` on a one-file directory (two model turns, one tool call).

For them the figure is the CPU time against ``--baseline`` (``cpu / before``), not the wall-time
target.

Target: each ``studio`` start command within 0.25 s of the reference (wall time). For every
command the script also prints, from one ``-X importtime`` run, the top-level packages that cost
the most to import beyond the reference's own: where the target is missed, that is where the time
goes.
Results go to ``bench/results/cli_start.json`` (git-ignored); the exit status is 0 whatever the
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "cli_start.json"
TARGET_S = 0.25
IMPORTTIME = re.compile(r"^import time:\s+(\d+) \|\s+\d+ \|(\s*)(\S+)$")


def studio_argv() -> list[str]:
    """The installed console script next to this interpreter (else ``python -m services.cli``)."""
    script = Path(sys.executable).with_name("studio")
    return [str(script)] if script.exists() else [sys.executable, "-m", "services.cli"]


# A one-command typer application asked for --help: what typer's own (rich) help page costs.
BARE_TYPER_HELP = """
import typer
app = typer.Typer(add_completion=False)
@app.command()
def hello(name: str = "x") -> None:
    \"\"\"Say hello.\"\"\"
@app.command()
def bye() -> None:
    \"\"\"Say bye.\"\"\"
app(["--help"])
"""


BASELINE_PREFIX = "before: "


START_NAMES = ("studio --help", "studio tools list", "studio tools call")


def start_commands(workspace: Path) -> dict[str, list[str]]:
    studio = studio_argv()
    return {
        "studio --help": [*studio, "--help"],
        "studio tools list": [*studio, "tools", "list"],
        "studio tools call": [*studio, "tools", "call", "workspace.list_dir",
                              "--workspace", str(workspace)],
    }


def replay_run(workspace: Path) -> list[str]:
    """``studio run`` of a two-turn replay script (one ``workspace.list_dir``) on ``workspace``."""
    script = workspace.parent / "script.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"tool": "workspace.list_dir", "args": {"path": "."}}]},
        {"final": "done"}]}))
    return [*studio_argv(), "run", "list it", "--workspace", str(workspace), "--provider",
            "replay", "--script", str(script), "--json"]


def database_commands(workspace: Path, execution_id: str) -> dict[str, list[str]]:
    studio = studio_argv()
    return {
        "studio executions show": [*studio, "executions", "show", execution_id, "--json"],
        "studio executions list": [*studio, "executions", "list", "--json"],
        "studio executions logs": [*studio, "executions", "logs", execution_id],
        "studio settings get": [*studio, "settings", "get", "max_iterations"],
        "studio teams list": [*studio, "teams", "list", "--json"],
        "studio executions deny": [*studio, "executions", "deny", execution_id,
                                   "00000000-0000-4000-8000-000000000000"],
        "studio killswitch off": [*studio, "killswitch", "off"],
        "studio run (replay)": replay_run(workspace),
    }


def commands(workspace: Path, baseline: Path | None = None, which: str = "all",
             execution_id: str = "") -> dict[str, list[str]]:
    studio_commands = start_commands(workspace) if which in ("start", "all") else {}
    if which in ("database", "all"):
        studio_commands |= database_commands(workspace, execution_id)
    before = {} if baseline is None else {
        BASELINE_PREFIX + name: argv for name, argv in studio_commands.items()}
    return {
        "python -c 'import typer'": [sys.executable, "-c", "import typer"],
        "bare typer app --help": [sys.executable, "-c", BARE_TYPER_HELP],
        **studio_commands,
        **before,
    }


# ``--baseline``: the sources the ``before: ...`` commands import (first on PYTHONPATH).
BASELINE_SOURCES: list[Path] = []


# The database commands' own data directory (an embedded SQLite database), set by main().
DATA_DIR: list[Path] = []
# Variables that would point a command at another database or at a broker.
DROPPED = ("PYTHONDONTWRITEBYTECODE", "STUDIO_DATABASE_URL", "STUDIO_BROKER_URL")


def environment(name: str = "") -> dict[str, str]:
    """This environment, but writing bytecode: an installed command runs from cached ``.pyc``
    files, and the warm-up writes them (``PYTHONDONTWRITEBYTECODE`` would have every run compile
    every changed module from source). A ``before: ...`` command gets the baseline's sources
    first on ``PYTHONPATH``. Every command uses the run's own data directory, no broker."""
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    if DATA_DIR:
        env["STUDIO_DATA_DIR"] = str(DATA_DIR[0])
    if name.startswith(BASELINE_PREFIX) and BASELINE_SOURCES:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(BASELINE_SOURCES[0]), *filter(None, [env.get("PYTHONPATH")])])
    return env


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], name: str = "") -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one run of ``argv`` (command ``name``)."""
    env = environment(name)
    cpu, started = children_cpu(), time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                   env=env)
    return time.perf_counter() - started, children_cpu() - cpu


def measure(cmds: dict[str, list[str]], reps: int) -> dict[str, list[tuple[float, float]]]:
    names = list(cmds)
    for name in names:  # warm-up: the page cache, the .pyc files
        run_once(cmds[name], name)
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            times[name].append(run_once(cmds[name], name))
    return times


def import_costs(argv: list[str], name: str = "") -> Counter[str]:
    """Self import time (seconds) per top-level package, from one ``-X importtime`` run."""
    env = {**environment(name), "PYTHONPROFILEIMPORTTIME": "1"}
    if Path(argv[0]).name == "studio":  # the console script is a Python file: run it with -X
        argv = [sys.executable, *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    costs: Counter[str] = Counter()
    for line in done.stderr.splitlines():
        match = IMPORTTIME.match(line)
        if match:
            costs[match.group(3).split(".")[0]] += int(match.group(1)) / 1e6
    return costs


def report(cmds: dict[str, list[str]],
           times: dict[str, list[tuple[float, float]]]) -> list[dict[str, object]]:
    names = list(cmds)
    reference = statistics.median(w for w, _ in times[names[0]])
    reference_cpu = statistics.median(c for _, c in times[names[0]])
    base_costs = import_costs(cmds[names[0]])
    rows: list[dict[str, object]] = []
    print(f"{'command':<34} {'median s':>9} {'min s':>7} {'- ref s':>8} {'ratio':>6} "
          f"{'cpu s':>6} {'- ref':>6}  verdict (wall)")
    for name in names:
        walls, cpus = [w for w, _ in times[name]], [c for _, c in times[name]]
        median, cpu = statistics.median(walls), statistics.median(cpus)
        diff = median - reference
        verdict = "" if name.removeprefix(BASELINE_PREFIX) not in START_NAMES else (
            "MET" if diff <= TARGET_S else f"MISS by {diff - TARGET_S:.3f} s")
        print(f"{name:<34} {median:>9.3f} {min(walls):>7.3f} {diff:>8.3f} "
              f"{median / reference:>5.2f}x {cpu:>6.3f} {cpu - reference_cpu:>6.3f}  {verdict}")
        rows.append({"command": name, "median_s": median, "min_s": min(walls),
                     "minus_reference_s": diff, "ratio": median / reference,
                     "cpu_median_s": cpu, "cpu_minus_reference_s": cpu - reference_cpu,
                     "verdict": verdict, "times_s": walls, "cpu_s": cpus})
    for name in names:
        before = BASELINE_PREFIX + name
        if before in times:
            cpu = statistics.median(c for _, c in times[name])
            cpu_before = statistics.median(c for _, c in times[before])
            print(f"  {name}: cpu {cpu:.3f} s against {cpu_before:.3f} s before: "
                  f"{cpu / cpu_before:.2f}x ({(1 - cpu / cpu_before) * 100:.0f} % less)")
            row = next(r for r in rows if r["command"] == name)
            row.update(cpu_before_s=cpu_before, cpu_ratio_to_before=cpu / cpu_before)
    for name in names[1:]:
        extra = import_costs(cmds[name], name) - base_costs
        top = ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in extra.most_common(8))
        print(f"  {name}: imports beyond the reference: {top}")
    return rows


def start_hogs(count: int) -> list[subprocess.Popen[bytes]]:
    """``count`` CPU-bound processes (on this process's CPUs), the controlled load."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop_hogs(hogs: list[subprocess.Popen[bytes]]) -> None:
    for hog in hogs:
        hog.kill()
        hog.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cpus", type=lambda text: {int(c) for c in text.split(",")},
                        help="pin everything to these CPUs (comma-separated)")
    parser.add_argument("--hogs", type=int, default=0,
                        help="CPU-bound processes kept running during the measurement")
    parser.add_argument("--commands", choices=("start", "database", "all"), default="all",
                        help="the start commands, the database commands, or both")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout's app/backend/src: its studio commands measured "
                             "too, as 'before: ...'")
    options = parser.parse_args()
    if options.baseline is not None:
        BASELINE_SOURCES[:] = [options.baseline.resolve()]
    if options.cpus:
        os.sched_setaffinity(0, options.cpus)
    load_before = os.getloadavg()[0]
    hogs = start_hogs(options.hogs)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            workspace = Path(scratch) / "ws"
            workspace.mkdir()
            (workspace / "README.md").write_text("sample\n")
            DATA_DIR[:] = [Path(scratch) / "data"]
            execution_id = ""
            if options.commands != "start":  # one execution for show, logs and deny to read
                done = subprocess.run(replay_run(workspace), env=environment(),
                                      capture_output=True, text=True, check=True)
                execution_id = json.loads(done.stdout.splitlines()[-1])["execution_id"]
            cmds = commands(workspace, options.baseline, options.commands, execution_id)
            times = measure(cmds, options.reps)
            rows = report(cmds, times)
    finally:
        stop_hogs(hogs)
    load_after = os.getloadavg()[0]
    cpus = sorted(os.sched_getaffinity(0))
    print(f"reps {options.reps}, load {load_before:.1f} before / {load_after:.1f} after, "
          f"{os.cpu_count()} CPUs, Python {platform.python_version()}")
    if options.cpus or options.hogs:
        print(f"controlled: pinned to CPUs {cpus}, {options.hogs} hogs there, autogroup "
              f"{Path('/proc/self/autogroup').read_text().strip()}")
    elif max(load_before, load_after) > (os.cpu_count() or 1):
        print("warning: the load average exceeded the CPU count; the numbers are noisy")
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps({"reps": options.reps, "target_s": TARGET_S,
                                       "load": [load_before, load_after], "cpus": cpus,
                                       "hogs": options.hogs,
                                       "baseline": str(options.baseline or ""),
                                       "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
