"""CPU time of the worker's fork server: its warm-up, and what each provider's first fork adds.

Run from the repository root (a minute or two on 2 cores at the default ``--reps 5``)::

    .venv/bin/python -m bench.fork_warmup
    .venv/bin/python -m bench.fork_warmup --baseline /tmp/base/app/backend/src
    .venv/bin/python -m bench.fork_warmup --preload codex --providers codex,mcp,gemini,claude

One repetition starts a real fork server (``ForkServer.start``, as ``studio worker`` does), waits
until it is ready and reads its CPU time (user + system, ``/proc/<pid>/stat``: the server's own,
not its children's), then forks one ``studio execute`` per provider of ``--providers`` in that
order (each of an execution id no database knows: it ends at once; each request names its
provider, as a worker's slot does) and reads the server's CPU again after each. So:

- ``ready``: the warm-up, what every ``studio worker`` pays at its start (with ``--preload``:
  the server is started with those provider names, as a worker whose environment configures
  those providers' credentials starts it, so their SDKs are part of it);
- ``+codex`` (then ``+mcp``, ``+gemini``, ``+claude``): the server's CPU after its first
  execution of that provider (``mcp``: the first request saying its execution may start MCP
  servers); what such a request loads (nothing on a server that preloaded everything before
  ``ready``). The last row is what a worker that served every provider and MCP has paid.

``--baseline SRC`` (the ``app/backend/src`` of another checkout, e.g. ``git archive`` of main
unpacked under /tmp) runs each repetition again with ``SRC`` first on ``PYTHONPATH`` (same
interpreter and packages, that tree's sources), named ``before``; a baseline whose request has no
provider field ignores it, and one whose ``ForkServer.start`` takes no provider names starts
without them. The variants alternate within each repetition (the order reversed every
other one) so that both see the same load. A first, unreported repetition of each writes the
bytecode of both trees (``PYTHONDONTWRITEBYTECODE`` is unset for the servers), so neither compiles
its sources in a measured one. Medians reported, and the ratios of this tree to the baseline;
exit status 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
UNKNOWN_ID = "3d6f0b9e-0000-4000-8000-00000000beef"
# Run in a process of each tree's own (its sources first on PYTHONPATH): prints one JSON line, the
# server's CPU seconds when ready and after the first fork of each provider.
DRIVER = r"""
import json, os, sys, tempfile
from services.executors.base import SubstrateStatus
from services.executors.forked import ForkedSubstrate, ForkServer

def cpu(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

providers = sys.argv[1].split(",") if sys.argv[1] else []
preload = sys.argv[3].split(",") if sys.argv[3] else []
try:
    server = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, providers=preload)
except TypeError:  # a tree whose fork server is told no providers at its start
    server = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
rows = [("ready", cpu(server.pid))]
with tempfile.TemporaryDirectory(prefix="fork-warmup-") as tmp:
    env = {"PATH": os.environ["PATH"], "HOME": tmp,
           "STUDIO_DATABASE_URL": f"sqlite:///{tmp}/studio.db", "STUDIO_DATA_DIR": f"{tmp}/data"}
    for provider in providers:
        hint = {"mcp": True} if provider == "mcp" else {"provider": provider}
        try:
            substrate = ForkedSubstrate(server, env, **hint)
        except TypeError:  # a tree whose requests name no provider and no MCP
            substrate = ForkedSubstrate(server, env)
        handle = substrate.launch(sys.argv[2])
        assert substrate.wait(handle, 300) is SubstrateStatus.FAILED
        rows.append(("+" + provider, cpu(server.pid)))
server.stop()
print(json.dumps(rows))
"""


def one_run(src: Path | None, providers: list[str],
            preload: list[str]) -> list[tuple[str, float]]:
    """One server of the tree ``src`` (None: this one). The server's environment is only the
    executor's non-secret names (no ``PYTHONPATH``), so the tree is chosen by the working
    directory it inherits: ``python -m`` puts it first on ``sys.path``."""
    tree = (src or ROOT / "app" / "backend" / "src").resolve()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("STUDIO_") and k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(tree)
    found = subprocess.run([PYTHON, "-c", DRIVER, ",".join(providers), UNKNOWN_ID,
                            ",".join(preload)], env=env,
                           capture_output=True, text=True, check=True, cwd=tree)
    return [(name, float(seconds)) for name, seconds in json.loads(found.stdout.splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--providers", default="codex,mcp,gemini,claude",
                        help="the providers forked after ready, in order (comma separated; "
                             "mcp: an execution that may start MCP servers)")
    parser.add_argument("--preload", default="",
                        help="the providers the server is told at its start (comma separated: "
                             "a worker whose environment has their credentials)")
    parser.add_argument("--baseline", type=Path, help="another checkout's app/backend/src")
    args = parser.parse_args()
    providers = [name for name in args.providers.split(",") if name]
    preload = [name for name in args.preload.split(",") if name]
    variants: dict[str, Path | None] = {"this tree": None}
    if args.baseline is not None:
        variants["before"] = args.baseline
    for src in variants.values():  # bytecode written, not measured
        one_run(src, providers, preload)
    samples: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    load_start = os.getloadavg()
    order = list(variants)
    for rep in range(args.reps):
        for name in (order if rep % 2 == 0 else order[::-1]):
            for row, seconds in one_run(variants[name], providers, preload):
                samples[name].setdefault(row, []).append(seconds)
    print("fork server CPU seconds (its own, user + system), medians of "
          f"{args.reps}; rows cumulative:")
    for name in order:
        for row, values in samples[name].items():
            print(f"  {name:10s} {row:8s} {statistics.median(values):6.2f} s "
                  f"(min {min(values):.2f}, max {max(values):.2f})")
    if "before" in samples:
        print("this tree / before:")
        for row, values in samples["this tree"].items():
            base = samples["before"].get(row)
            if base:
                print(f"  {row:8s} {statistics.median(values) / statistics.median(base):5.2f}x")
    print(f"load average at start {load_start[0]:.1f}, at end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
