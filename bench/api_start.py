"""CPU time of starting the API and a flowchart node's process, optionally next to another checkout.

Run from the repository root (about a minute on 2 cores at the default ``--reps 5``)::

    .venv/bin/python -m bench.api_start
    .venv/bin/python -m bench.api_start --baseline /tmp/base/app/backend/src

Measured, ``--reps`` times each, interleaved (the order reversed every other repetition) so
that every variant sees the same machine load; the CPU time (user + system) of each process,
which moves much less with the load than wall time; medians reported:

- ``import``: ``python -c "import services.api.app"``;
- ``api``: a real ``studio api --port 0`` (no broker, a SQLite database migrated beforehand, as
  a restarted API finds it), from its start until it has answered ``GET /healthz`` once (its
  CPU read from ``/proc`` then, the process stopped after);
- ``api, new db``: the same on a new SQLite file, which the API migrates as it starts (what
  every API test's server does);
- ``node``: ``python -c`` importing what ``studio flowchart-node`` imports before it runs its
  node (the command line, the database opener, the flowchart run service).

``--baseline SRC`` (the ``app/backend/src`` directory of another checkout, e.g. ``git archive``
of main unpacked under /tmp) runs each again with ``SRC`` first on ``PYTHONPATH`` (same
interpreter and packages, that tree's sources), named ``before: ...``. The migrations of this
checkout are used for both (``STUDIO_MIGRATIONS_DIR``). The environment is kept as it is
(``PYTHONDONTWRITEBYTECODE`` included: with it set, as on the shared machine, every process
compiles the project's sources). Prints one line per variant and the load average; the exit
status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
NODE_IMPORTS = ("import services.cli.main, services.cli.flowchart_node, services.cli.database, "
                "services.flowcharts.service")


def child_cpu(argv: list[str], env: dict[str, str]) -> float:
    """User + system CPU seconds of one process run to its end."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execvpe(argv[0], argv, env)
    _, _, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime


def api_cpu(env: dict[str, str], *, migrated: bool = True) -> float:
    """CPU seconds of ``studio api`` until it has answered ``/healthz`` once."""
    with tempfile.TemporaryDirectory(prefix="api-start-") as tmp:
        run_env = {**env, "STUDIO_DATABASE_URL": f"sqlite:///{tmp}/studio.db",
                   "STUDIO_DATA_DIR": f"{tmp}/data", "STUDIO_WORKSPACE_DIR": f"{tmp}/ws",
                   "HOME": tmp}
        if migrated:
            subprocess.run([PYTHON, "-m", "services.cli", "db", "upgrade"], env=run_env,
                           capture_output=True, check=True)
        process = subprocess.Popen([PYTHON, "-m", "services.cli", "api", "--port", "0"],
                                   env=run_env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        try:
            assert process.stderr is not None
            port = next(m.group(1) for line in process.stderr
                        if (m := LISTENING.search(line)))
            urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=60).read()
            fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        finally:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def variants(base_env: dict[str, str]) -> dict[str, Callable[[], float]]:
    return {
        "import": lambda: child_cpu([PYTHON, "-c", "import services.api.app"], base_env),
        "api": lambda: api_cpu(base_env),
        "api, new db": lambda: api_cpu(base_env, migrated=False),
        "node": lambda: child_cpu([PYTHON, "-c", NODE_IMPORTS], base_env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another checkout's app/backend/src")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env["STUDIO_MIGRATIONS_DIR"] = str(ROOT / "migrations")
    runs = variants(env)
    if args.baseline is not None:
        before = {**env, "PYTHONPATH": str(args.baseline.resolve())}
        runs |= {f"before: {name}": run for name, run in variants(before).items()}
    order = list(runs)
    samples: dict[str, list[float]] = {name: [] for name in order}
    load_start = os.getloadavg()
    for rep in range(args.reps):
        for name in (order if rep % 2 == 0 else order[::-1]):
            samples[name].append(runs[name]())
    for name in order:
        values = samples[name]
        print(f"{name:16s} CPU median {statistics.median(values):.2f} s "
              f"(min {min(values):.2f}, max {max(values):.2f}, n={len(values)})")
    print(f"load average at start {load_start[0]:.1f}, at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
