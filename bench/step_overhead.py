"""Per-step harness overhead of every provider, next to the physical floor measured in the same run.

Run from the repository root (about 2 to 3 minutes on 2 cores)::

    .venv/bin/python -m bench.step_overhead
    .venv/bin/python bench/step_overhead.py --reps 5 --steps 10,100

Each step, the scripted model server asks for ``command_run {"argv": ["true", "<i>"]}``; after N
steps it answers a final text. Measured, each ``--reps`` times (medians reported), harness and
reference interleaved so both see the same machine load:

- codex (responses), codex (chat), gemini: FrontierAgent with the real dispatcher against the
  hand-built HTTP floor of the same wire format (:mod:`bench.overhead_turns`), in each sandbox mode
  of ``--sandboxes`` (``auto`` is what the dispatcher uses: bubblewrap here; ``none`` isolates the
  harness's own cost);
- claude: ClaudeEngine through FrontierAgent against a bare ``claude-agent-sdk`` loop
  (:mod:`bench.overhead_claude`).

Targets: codex and gemini within 2x the floor and flat as the conversation grows; claude within
1.2x the bare SDK loop. Results go to ``bench/results/step_overhead.json`` (git-ignored). The exit
status is 0 whatever the numbers: this is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python bench/step_overhead.py``: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import overhead_claude, overhead_turns  # noqa: E402
from bench.overhead_common import RunTiming, median_of  # noqa: E402
from bench.overhead_report import Row, print_table, verdicts  # noqa: E402
from services.execution.ports import CommandSandbox  # noqa: E402
from services.execution.sandbox.selection import select_sandbox  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "step_overhead.json"
Measure = Callable[[int], RunTiming]


@dataclass(frozen=True)
class Config:
    reps: int
    claude_reps: int
    steps: tuple[int, ...]
    wires: tuple[str, ...]
    sandboxes: tuple[str, ...]
    claude: bool
    claude_sandboxes: tuple[str, ...]
    claude_bare_tools: str
    out: Path


def parse_args(argv: list[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=3,
                        help="repetitions per codex/gemini measure (median)")
    parser.add_argument("--claude-reps", type=int, default=3,
                        help="repetitions per claude measure (median)")
    parser.add_argument("--steps", default="10,100", help="step counts, comma-separated")
    parser.add_argument("--providers", default="responses,chat,gemini,claude",
                        help="any of responses, chat, gemini, claude")
    parser.add_argument("--sandboxes", default="auto,none",
                        help="sandbox modes for codex and gemini")
    parser.add_argument("--claude-sandboxes", default="auto", help="sandbox modes for claude")
    parser.add_argument("--claude-bare-tools", choices=("same", "one"), default="same",
                        help="the bare SDK loop declares the harness's tools, or command_run only")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    providers = _split(args.providers)
    unknown = set(providers) - {*overhead_turns.WIRES, "claude"}
    if unknown:
        parser.error(f"unknown providers: {', '.join(sorted(unknown))}")
    return Config(
        reps=max(1, args.reps), claude_reps=max(1, args.claude_reps),
        steps=tuple(int(s) for s in _split(args.steps)),
        wires=tuple(w for w in overhead_turns.WIRES if w in providers),
        sandboxes=_split(args.sandboxes), claude="claude" in providers,
        claude_sandboxes=_split(args.claude_sandboxes),
        claude_bare_tools=args.claude_bare_tools, out=args.out,
    )


def _split(text: str) -> tuple[str, ...]:
    return tuple(s.strip() for s in text.split(",") if s.strip())


def _pair(reps: int, n: int, harness: Measure, reference: Measure) -> tuple[
        list[RunTiming], list[RunTiming]]:
    """``reps`` runs of each, interleaved (the order alternates) so both see the same load."""
    ours: list[RunTiming] = []
    theirs: list[RunTiming] = []
    for rep in range(reps):
        gc.collect()
        if rep % 2 == 0:
            ours.append(harness(n))
            theirs.append(reference(n))
        else:
            theirs.append(reference(n))
            ours.append(harness(n))
    return ours, theirs


def _row(provider: str, sandbox: str, n: int, reference: str, ours: list[RunTiming],
         theirs: list[RunTiming]) -> Row:
    return Row(
        provider=provider, sandbox=sandbox, steps=n, reference=reference,
        harness_ms=median_of(ours, lambda r: r.per_step_ms),
        reference_ms=median_of(theirs, lambda r: r.per_step_ms),
        harness_early_ms=median_of(ours, lambda r: r.early_ms),
        harness_late_ms=median_of(ours, lambda r: r.late_ms),
        reference_early_ms=median_of(theirs, lambda r: r.early_ms),
        reference_late_ms=median_of(theirs, lambda r: r.late_ms),
        harness_cpu_ms=median_of(ours, lambda r: r.cpu_per_step_ms),
        reference_cpu_ms=median_of(theirs, lambda r: r.cpu_per_step_ms),
        harness_runs_ms=[round(r.per_step_ms, 3) for r in ours],
        reference_runs_ms=[round(r.per_step_ms, 3) for r in theirs],
    )


def measure_turns(config: Config, sandbox: CommandSandbox, workspace: Path) -> list[Row]:
    rows: list[Row] = []
    for wire in config.wires:
        def ours(n: int, wire: str = wire) -> RunTiming:
            return overhead_turns.harness(wire, sandbox, n, workspace)

        def floor(n: int, wire: str = wire) -> RunTiming:
            return overhead_turns.floor(wire, sandbox, n, workspace)

        _pair(1, 3, ours, floor)  # warm-up (imports, first connections), not counted
        for n in config.steps:
            harness_runs, floor_runs = _pair(config.reps, n, ours, floor)
            rows.append(_row(overhead_turns.LABELS[wire], sandbox.mode, n, "http floor",
                             harness_runs, floor_runs))
            _progress(rows[-1])
    return rows


def measure_claude(config: Config, sandbox: CommandSandbox, workspace: Path) -> list[Row]:
    def ours(n: int) -> RunTiming:
        return overhead_claude.harness(sandbox, n, workspace)

    def bare(n: int) -> RunTiming:
        return overhead_claude.bare(sandbox, n, workspace, config.claude_bare_tools)

    _pair(1, 1, ours, bare)  # warm-up: the CLI binary into the page cache
    rows: list[Row] = []
    for n in config.steps:
        harness_runs, bare_runs = _pair(config.claude_reps, n, ours, bare)
        rows.append(_row("claude", sandbox.mode, n, f"bare sdk ({config.claude_bare_tools})",
                         harness_runs, bare_runs))
        _progress(rows[-1])
    return rows


def _progress(row: Row) -> None:
    print(f"  measured {row.provider:<18} {row.sandbox:<6} N={row.steps:<4} "
          f"{row.harness_ms:7.2f} vs {row.reference_ms:7.2f} ms/step", flush=True)


def _environment() -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for dist in ("openai", "google-genai", "claude-agent-sdk", "httpx2", "anyio"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return {"python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "packages": versions}


def run(config: Config) -> dict[str, Any]:
    load_before = os.getloadavg()
    print(f"step overhead: load average {_load(load_before)} on {os.cpu_count()} CPUs "
          f"(the machine is shared: numbers move with it)", flush=True)
    # the SDKs' modules make a large heap: without this a full collection (about 100 ms here)
    # lands in whichever loop happens to run, harness or floor
    gc.collect()
    gc.freeze()
    started = time.monotonic()
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp:
        workspace = Path(tmp)
        for mode in config.sandboxes if config.wires else ():
            rows += measure_turns(config, select_sandbox(mode), workspace)
        for mode in config.claude_sandboxes if config.claude else ():
            rows += measure_claude(config, select_sandbox(mode), workspace)
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    print()
    print_table(rows)
    checks = verdicts(rows)
    print()
    for check in checks:
        mark = {True: "MET ", False: "MISS", None: "n/a "}[check["met"]]
        print(f"  [{mark}] {check['target']}: {check['detail']}")
    print(f"\nload average {_load(load_before)} before, {_load(load_after)} after; "
          f"{elapsed:.0f} s in all")
    if max(load_before[0], load_after[0]) > (os.cpu_count() or 1):
        print("WARNING: the load average exceeded the CPU count during the run: wall-time ratios "
              "are noisy (the cpu h/r column moves much less with load); rerun on a quieter "
              "machine or with more --reps")
    return {
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "elapsed_s": round(elapsed, 1),
        "load_average": {"before": load_before, "after": load_after},
        "environment": _environment(),
        "config": {**asdict(config), "out": str(config.out)},
        "rows": [asdict(r) for r in rows], "targets": checks,
    }


def _load(load: tuple[float, float, float]) -> str:
    return "/".join(f"{x:.2f}" for x in load)


def main(argv: list[str] | None = None) -> int:
    config = parse_args(argv)
    report = run(config)
    config.out.parent.mkdir(parents=True, exist_ok=True)
    config.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {config.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
