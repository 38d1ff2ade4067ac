"""CPU time of a ``studio`` command the tests run, exec'ed fresh against forked by the warm CLI
launcher (:mod:`tests.support.warm_cli`), side by side.

Run from the repository root (about a minute and a half on 2 cores at the default
``--reps 3``)::

    .venv/bin/python -m bench.warm_cli

Each command runs ``--reps`` times each way, interleaved (the order reversed every other
repetition, so both see the same machine load): ``fresh`` is :class:`subprocess.Popen` (its CPU
from ``RUSAGE_CHILDREN`` around its wait), ``warm`` is :class:`tests.support.warm_cli.Popen`
(its CPU as the zygote reports it on reaping it). The CPU time (user + system) of each process,
from its fork or exec to its end; medians reported, with the ratio. The zygote's own warm-up
(once per pytest process) is printed too. The commands, on a SQLite database migrated
beforehand: ``studio --help``, ``studio executions list --json``, ``studio settings set``,
``studio providers``, ``studio run`` (a replay run of one ``true`` command on a directory), and
``studio api --port 0`` from its start to its ``Uvicorn running`` line, then ``SIGTERM`` (its
shutdown included). The environment is kept as it is, but ``PYTHONDONTWRITEBYTECODE`` should be
unset (as ``scripts/test.sh`` does) for numbers like the suite's. Exit status 0 whatever the
numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from tests.integration.databases import write_migrated_sqlite
from tests.support import warm_cli

STUDIO = [sys.executable, "-m", "services.cli"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _one(launcher: type[subprocess.Popen[bytes]], argv: list[str], env: dict[str, str],
         until: str | None) -> float:
    """CPU seconds of one process of ``argv`` started by ``launcher``."""
    before_fresh, before_warm = _children_cpu(), warm_cli.children_cpu()
    process = launcher(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE if until else subprocess.DEVNULL)
    if until is not None:
        assert process.stderr is not None
        for line in process.stderr:
            if until.encode() in line:
                break
        process.send_signal(signal.SIGTERM)
        process.stderr.close()
    code = process.wait(300)
    if code not in (0, -signal.SIGTERM):
        raise SystemExit(f"{argv[3:]} exited {code}")
    forked = bool(getattr(process, "forked", False))
    if launcher is warm_cli.Popen and not forked:
        raise SystemExit(f"{argv[3:]} was not forked")
    return (warm_cli.children_cpu() - before_warm) if forked else (_children_cpu() - before_fresh)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-warm-cli-"))
    write_migrated_sqlite(root / "studio.db")
    (root / "ws").mkdir()
    script = root / "script.json"
    script.write_text(json.dumps({"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {"argv": ["true"]}}]},
        {"final": "done"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(warm_cli.NOT_INHERITED)}
    env.update(STUDIO_DATABASE_URL=f"sqlite:///{root / 'studio.db'}", HOME=str(root),
               STUDIO_DATA_DIR=str(root / "data"))
    cases: list[tuple[str, list[str], str | None]] = [
        ("--help", ["--help"], None),
        ("executions list --json", ["executions", "list", "--json"], None),
        ("settings set", ["settings", "set", "max_iterations", "7"], None),
        ("providers", ["providers"], None),
        ("run (replay, one command)", ["run", "bench", "--workspace", str(root / "ws"),
                                       "--provider", "replay", "--script", str(script)], None),
        ("api (start to SIGTERM)", ["api", "--port", "0"], "Uvicorn running"),
    ]
    zygote = warm_cli.zygote()
    if zygote is None:
        raise SystemExit("the zygote did not start")
    stat = Path(f"/proc/{zygote.process.pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    warm_up = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    print(f"zygote warm-up: {warm_up:.2f} CPU-s, {zygote.ready['modules']} modules")
    for name, command, until in cases:
        runs: dict[str, list[float]] = {"fresh": [], "warm": []}
        for rep in range(args.reps):
            order: list[tuple[str, Callable[..., float]]] = [
                ("fresh", lambda c=command, u=until: _one(subprocess.Popen, [*STUDIO, *c], env, u)),
                ("warm", lambda c=command, u=until: _one(warm_cli.Popen, [*STUDIO, *c], env, u))]
            for label, run in order if rep % 2 == 0 else reversed(order):
                runs[label].append(run())
        fresh, warm = statistics.median(runs["fresh"]), statistics.median(runs["warm"])
        print(f"{name:28s} fresh {fresh:5.2f}  warm {warm:5.2f} CPU-s  "
              f"fresh/warm {fresh / warm:5.1f}x")
    print("load average:", " ".join(Path("/proc/loadavg").read_text().split()[:3]))


if __name__ == "__main__":
    main()
