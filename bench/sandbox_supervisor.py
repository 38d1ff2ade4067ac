"""The sandbox supervisor's cost: its memory (one per running execution) and CPU per command.

For this checkout and, with ``--source DIR``, another one (``git archive main | tar -x -C DIR``),
run one after the other from this script: a real bubblewrap session (``bwrap-session``) in a
fresh workspace runs ``--commands`` ``true`` commands through the command domain; reported are
the supervisor's PSS and USS after them (``/proc/<pid>/smaps_rollup``), the CPU time of its
process tree per command (its own and its reaped commands', ``/proc/<pid>/stat``: load-
independent), and the CPU time of starting the bare script (``python -I -S``, its imports), the
median of ``--starts`` runs::

    python bench/sandbox_supervisor.py
    python bench/sandbox_supervisor.py --source /tmp/base --commands 200
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = """
import json, os, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from tests.unit.execution.command_helpers import run_command, sandbox_context

def parent(pid):
    return int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])

def tree_cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")

def ours(pid):
    while pid > 1:
        pid = parent(pid)
        if pid == os.getpid():
            return True
    return False

def supervisor():
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            line = open(f"/proc/{name}/cmdline", "rb").read()
            if line.split(b"\\0")[0].endswith(b"bwrap") or b"/proc/self/fd/" not in line:
                continue
            if ours(int(name)):
                found.append(int(name))
        except (OSError, ValueError):
            continue
    return found[0]

def rollup(pid):
    values = {}
    for line in open(f"/proc/{pid}/smaps_rollup"):
        key, _, rest = line.partition(":")
        if key in ("Pss", "Private_Clean", "Private_Dirty"):
            values[key] = int(rest.split()[0])
    return values["Pss"], values["Private_Clean"] + values["Private_Dirty"]

commands = int(sys.argv[1])
with tempfile.TemporaryDirectory() as scratch:
    workspace = Path(scratch) / "ws"
    workspace.mkdir()
    with sandbox_context(workspace, "bwrap-session") as ctx:
        run_command(ctx, argv=["true"])
        pid = supervisor()
        before = tree_cpu(pid)
        for _ in range(commands):
            assert run_command(ctx, argv=["true"])["ok"]
        cpu = (tree_cpu(pid) - before) / commands
        pss, uss = rollup(pid)
print(json.dumps({"cpu_ms": cpu * 1000, "pss_kb": pss, "uss_kb": uss}))
"""


def measure(checkout: Path, commands: int, starts: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(checkout / "app" / "backend" / "src")}
    done = subprocess.run([sys.executable, "-c", CHILD, str(commands), str(checkout)],
                          env=env, capture_output=True, text=True, check=True, cwd=checkout)
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    script = checkout / "app/backend/src/services/execution/sandbox/supervisor.py"
    load = f"exec(compile(open({str(script)!r}).read(), 's', 'exec'), {{'__name__': 's'}})"
    python = subprocess.run([sys.executable, "-c", "from services.execution.sandbox.layout "
                             "import sandbox_python; print(sandbox_python())"], env=env,
                            capture_output=True, text=True, check=True).stdout.strip()
    samples = []
    for _ in range(starts):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([python, "-I", "-S", "-c", load], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        samples.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    result["start_ms"] = statistics.median(samples) * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", type=Path, default=None, help="a baseline checkout")
    parser.add_argument("--commands", type=int, default=100)
    parser.add_argument("--starts", type=int, default=21)
    args = parser.parse_args()
    runs = [("this checkout", ROOT)]
    if args.source is not None:
        runs.insert(0, (f"baseline {args.source}", args.source.resolve()))
    print(f"load average {os.getloadavg()[0]:.1f}; {args.commands} commands, "
          f"{args.starts} starts", flush=True)
    print(f"{'run':40s} {'PSS MB':>7s} {'USS MB':>7s} {'ms CPU/command':>15s} "
          f"{'ms CPU/start':>13s}")
    for name, checkout in runs:
        with tempfile.TemporaryDirectory():
            found = measure(checkout, args.commands, args.starts)
        print(f"{name[:40]:40s} {found['pss_kb'] / 1024:7.1f} {found['uss_kb'] / 1024:7.1f} "
              f"{found['cpu_ms']:15.2f} {found['start_ms']:13.1f}", flush=True)


if __name__ == "__main__":
    main()
