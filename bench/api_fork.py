"""CPU per execution of a ``studio api`` without a broker: exec'ed children against forked ones.

Without a broker the API runs each execution from its own process, in a ``studio execute``
child: exec'ed (a fresh interpreter that imports the engine) with ``STUDIO_WORKER_FORK_SERVER``
off, as every API did before; forked from the API's own fork server with it on (the default),
once the server, started at the API's first execution, is warm (the executions before that are
exec'ed). Run from the repository root (a few minutes on 2 cores at the defaults)::

    .venv/bin/python -m bench.api_fork
    .venv/bin/python -m bench.api_fork --executions 6 --reps 3

One run: a real ``studio api --port 0`` (no broker, a new SQLite database, a git host serving a
seeded repository, as ``tests/integration/api`` starts it), ``--executions`` replay executions
created over HTTP one after the other, each waited for (each clones the repository, writes a
file, answers; as the API tests' executions do), then ``SIGTERM``. Its CPU is the API's process
tree, reaped with ``wait4``: the API, every ``studio execute`` child (reaped by the API), the
fork server and the children it forked (the API dies of the ``SIGTERM`` uvicorn raises again and
never reaps its fork server: this script is the subreaper that reaps it, with the children it
forked and reaped in its rusage); git's server side runs in this process and is not counted.
The same with no execution gives the API's own cost
(start, idle, stop); the difference over ``--executions`` is the CPU per execution, the fork
server's warm-up included for ``fork``. ``exec`` (the setting off) is the code path every
broker-less API took before this change (the baseline). The variants alternate within each
repetition (the order reversed every other one) so that both see the same load; a first,
unreported run of each writes the bytecode. Medians reported, and fork / exec; exit status 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integration.api.helpers import create, wait_final  # noqa: E402
from tests.integration.api.server import (  # noqa: E402
    API_COMMAND,
    GIT_TOKEN,
    REPO,
    ApiServer,
    studio_env,
)
from tests.support.git_http_server import git_http_server, seed_bare_repo  # noqa: E402

LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
SCRIPT = {"turns": [
    {"tool_calls": [{"tool": "workspace.write_file",
                     "args": {"path": "a.txt", "content": "one\n"}}]},
    {"final": "done"},
]}
VARIANTS = {"exec": "false", "fork": "true"}
PR_SET_CHILD_SUBREAPER = 36


def one_run(variant: str, executions: int) -> float:
    """The CPU seconds (user + system) of one API's process tree running ``executions``."""
    with tempfile.TemporaryDirectory(prefix="bench-api-fork-") as tmp, \
            git_http_server(Path(tmp) / "git-host", GIT_TOKEN) as host:
        root = Path(tmp)
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        env = studio_env(root, host.base_url)
        env["STUDIO_WORKER_FORK_SERVER"] = VARIANTS[variant]
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        process = subprocess.Popen(list(API_COMMAND), env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        log: list[str] = []
        port: list[int] = []
        found = threading.Event()

        def drain() -> None:
            assert process.stderr is not None
            for line in process.stderr:
                log.append(line)
                match = LISTENING.search(line)
                if match and not found.is_set():
                    port.append(int(match.group(1)))
                    found.set()
            found.set()

        threading.Thread(target=drain, daemon=True).start()
        try:
            found.wait(120)
            assert port, "studio api did not start:\n" + "".join(log)
            api = ApiServer(url=f"http://127.0.0.1:{port[0]}", db_url=env["STUDIO_DATABASE_URL"],
                            repo_url=host.url(REPO), env=env, process=process, log=log)
            for _ in range(executions):
                row = wait_final(api, create(api, SCRIPT), timeout=600)
                assert row["status"] == "succeeded", row
        finally:
            process.send_signal(signal.SIGTERM)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            cpu = usage.ru_utime + usage.ru_stime + orphans_cpu()
    return cpu


def orphans_cpu(quiet_s: float = 2.0) -> float:
    """The CPU of the API's descendants that outlived it, reaped here (this process is their
    subreaper): the API dies of the ``SIGTERM`` uvicorn raises again, so it never reaps its fork
    server, which dies with it (``PR_SET_PDEATHSIG``); the server's rusage holds the children it
    forked and reaped."""
    total, last = 0.0, time.monotonic()
    while time.monotonic() - last < quiet_s:
        try:
            pid, _, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            time.sleep(0.05)
            continue
        total += usage.ru_utime + usage.ru_stime
        last = time.monotonic()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--executions", type=int, default=6)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    # orphans (the API's fork server and what it forked) are reparented to this process
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    for variant in VARIANTS:  # bytecode written, not measured
        one_run(variant, 1)
    load_start = os.getloadavg()
    samples: dict[tuple[str, int], list[float]] = {}
    order = list(VARIANTS)
    started = time.monotonic()
    for rep in range(args.reps):
        for variant in (order if rep % 2 == 0 else order[::-1]):
            for count in (0, args.executions):
                samples.setdefault((variant, count), []).append(one_run(variant, count))
    print(f"CPU seconds of a broker-less studio api's process tree, medians of {args.reps} "
          f"({time.monotonic() - started:.0f} s):")
    per: dict[str, float] = {}
    for variant in order:
        idle = statistics.median(samples[(variant, 0)])
        busy = statistics.median(samples[(variant, args.executions)])
        per[variant] = (busy - idle) / args.executions
        print(f"  {variant:5s} no execution {idle:6.2f}   {args.executions} executions "
              f"{busy:6.2f}   per execution {per[variant]:5.2f}")
    print(f"fork / exec per execution: {per['fork'] / per['exec']:.2f}x; saved "
          f"{per['exec'] - per['fork']:.2f} CPU-s per execution")
    print(f"load average at start {load_start[0]:.1f}, at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
