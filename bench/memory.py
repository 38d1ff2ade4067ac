"""Resident memory of a long execution: how much it grows from step 10 to step 300.

Run from the repository root (about a minute on 2 cores)::

    .venv/bin/python -m bench.memory
    .venv/bin/python bench/memory.py --steps 300 --database postgresql://postgres@127.0.0.1/test

One execution through the product path of ``studio run --repo`` (``ExecutionService``, the
durable path: clone, buffered journal, checkpoints, finalization), run in this process so that its
resident set can be read from ``/proc/self/statm`` as the loop goes: a sink samples it at every
model request. The replay script is ``--steps`` turns of a usual run (a small file written, the file
``cat``-ed, the file read), then a final answer. The journal is a fresh SQLite file (or, with
``--database``, a fresh PostgreSQL database created next to the one named and dropped after).

Reported: the resident set at step 10 (the baseline of the same run) and at the last step, the
growth between them, and a few points in between. With ``--trace``, ``tracemalloc`` also runs
and the allocation sites that grew most between the two steps are printed (where a leak would
show). Target: less than 50 MiB of growth from step 10 to step 300. Results go to
``bench/results/memory.json`` (git-ignored); the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import tracemalloc
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python bench/memory.py``: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.storage import GIT_ENV, make_repository, typical_script  # noqa: E402
from services.execution.ports import AgentEvent, AgentEventKind  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "memory.json"
BASELINE_STEP = 10
TARGET_MIB = 50.0
PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_mib() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE / 2**20


@dataclass
class Probe:
    """An event sink sampling the resident set at each model request."""

    trace: bool
    samples: dict[int, float] = field(default_factory=dict)
    snapshots: dict[int, Any] = field(default_factory=dict)

    def emit(self, event: AgentEvent) -> None:
        if event.kind is not AgentEventKind.MODEL_REQUEST:
            return
        step = event.cycle + 1
        self.samples[step] = resident_mib()
        if self.trace and step in (BASELINE_STEP, self.last):
            self.snapshots[step] = tracemalloc.take_snapshot()

    last: int = 0


def run(steps: int, root: Path, database_url: str, trace: bool) -> Probe:
    from services.db.session import open_database
    from services.runs.request import ExecutionRequest
    from services.runs.service import ExecutionService
    from services.settings import StudioSettings

    os.environ.update(GIT_ENV)
    settings = StudioSettings(database_url=database_url, data_dir=root / "data",
                              workspace_dir=root / "workspaces", sandbox="none")
    repo = make_repository(root / "repo", "print('hello')\n")
    probe = Probe(trace)
    probe.last = steps
    if trace:
        tracemalloc.start(10)
    db = open_database(settings, check=False)
    try:
        from services.db import migrate

        migrate.upgrade(db.engine)
        outcome = ExecutionService(db, settings).run(ExecutionRequest(
            provider="replay", prompt="bench memory", repo_url=str(repo), allow_local=True,
            pull_request=False, script=typical_script(steps)[0],
            limit_overrides={"max_iterations": steps + 5}), sinks=[probe])
    finally:
        db.dispose()
    if outcome.status != "succeeded":
        raise SystemExit(f"the execution ended {outcome.status}: {outcome.message}")
    return probe


def report(probe: Probe, steps: int) -> dict[str, Any]:
    base, last = probe.samples[BASELINE_STEP], probe.samples[steps]
    growth = last - base
    points = {s: round(v, 1) for s, v in sorted(probe.samples.items())
              if s in (1, BASELINE_STEP, steps) or s % 50 == 0}
    print(f"resident set (MiB) by step: {points}")
    print(f"step {BASELINE_STEP}: {base:.1f} MiB, step {steps}: {last:.1f} MiB, "
          f"growth {growth:.1f} MiB")
    verdict = "met" if growth < TARGET_MIB else "MISSED"
    print(f"target: growth under {TARGET_MIB:.0f} MiB from step {BASELINE_STEP} to {steps}: "
          f"{verdict}")
    if probe.snapshots:
        diff = probe.snapshots[steps].compare_to(probe.snapshots[BASELINE_STEP], "lineno")
        print("allocation sites that grew most:")
        for stat in diff[:12]:
            print(f"  {stat.size_diff / 1024:>9.1f} KiB  {stat.traceback}")
    return {"steps": steps, "baseline_step": BASELINE_STEP, "baseline_mib": base,
            "last_mib": last, "growth_mib": growth, "points": points}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--database", help="a PostgreSQL admin URL (database `test`)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc the growth")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="studio-bench-memory-") as tmp:
        root = Path(tmp)
        if args.database:
            import psycopg

            name = f"studio_bench_memory_{uuid.uuid4().hex[:10]}"
            with psycopg.connect(args.database, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = "postgresql+psycopg://" + args.database.split("://", 1)[1].rsplit("/", 1)[0] \
                + f"/{name}"
            try:
                probe = run(args.steps, root, url, args.trace)
            finally:
                with psycopg.connect(args.database, autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            database = "postgresql"
        else:
            probe = run(args.steps, root, f"sqlite:///{root / 'studio.db'}", args.trace)
            database = "sqlite"
    result = {"database": database, **report(probe, args.steps)}
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
