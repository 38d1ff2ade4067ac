"""What a sandbox adds to one command step: ``command.run`` of ``true``, side by side in one run.

Run from the repository root (about half a minute on 2 cores)::

    .venv/bin/python -m bench.sandbox_step
    .venv/bin/python bench/sandbox_step.py --commands 200 --rounds 5

Each variant runs the real ``command.run`` tool (argument model, scrubbed environment, per-command
scratch directory, limits, capped output) in the same workspace:

- ``none``: no sandbox (``STUDIO_SANDBOX=none``: the limits' gate and cgroup only);
- ``bwrap-per-command``: one ``bwrap`` per command (what every command paid before the
  execution's sandbox, and what ``studio tools call`` and a flowchart command node still pay);
- ``bwrap-session``: the execution's long-lived sandbox (one ``bwrap`` and its supervisor for all
  the commands, started before the timed part, as an execution's first command would);
- ``landlock``: the Landlock sandbox (per command), when the kernel and a cgroup allow it.

The variants are interleaved in ``--rounds`` rounds of ``--commands`` commands each (the order
rotating every round) so all see the same machine load; the median of the per-round means is
reported, with each sandbox's difference to ``none`` and the ratio. Target: ``bwrap-session``
minus ``none`` at most 2 ms. The start of the execution's sandbox (first command) is reported
separately. Results go to ``bench/results/sandbox_step.json`` (git-ignored); the exit status is 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "app" / "backend" / "src"))

import logging  # noqa: E402

from services.execution.sandbox.selection import select_sandbox  # noqa: E402
from services.execution.tool_domains.command.tools import RunArgs, run  # noqa: E402
from services.execution.tool_domains.context import ToolDomainContext  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "sandbox_step.json"


def _context(workspace: Path, sandbox: Any) -> ToolDomainContext:
    return ToolDomainContext(workspace_root=workspace, execution_id="bench", request_id="bench",
                             correlation_id="bench", sandbox=sandbox)


def _step(ctx: ToolDomainContext) -> None:
    result = run(RunArgs(argv=["true"]), ctx)
    if result["exit_code"] != 0:
        raise SystemExit(f"`true` failed under {result['sandbox']}: {result}")


def _timed(ctx: ToolDomainContext, n: int) -> float:
    """Mean milliseconds per command over ``n`` commands."""
    started = time.perf_counter()
    for _ in range(n):
        _step(ctx)
    return (time.perf_counter() - started) * 1000 / n


@contextlib.contextmanager
def _variants(workspace: Path) -> Iterator[dict[str, ToolDomainContext]]:
    found: dict[str, ToolDomainContext] = {"none": _context(workspace, select_sandbox("none"))}
    bwrap = select_sandbox("bwrap")
    landlock = select_sandbox("landlock")
    with contextlib.ExitStack() as stack:
        if bwrap.mode == "bwrap":
            found["bwrap-per-command"] = _context(workspace, bwrap)
            session = stack.enter_context(bwrap.session(workspace, lambda code, text: None))
            found["bwrap-session"] = _context(workspace, session)
        if landlock.mode == "landlock":
            found["landlock"] = _context(workspace, landlock)
        yield found


def _first_command_ms(workspace: Path) -> float | None:
    """The first command of an execution under bubblewrap: the sandbox's start included."""
    bwrap = select_sandbox("bwrap")
    if bwrap.mode != "bwrap":
        return None
    with bwrap.session(workspace, lambda code, text: None) as session:
        return _timed(_context(workspace, session), 1)


def measure(commands: int, rounds: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="studio-bench-sandbox-") as scratch:
        workspace = Path(scratch)
        with _variants(workspace) as variants:
            names = list(variants)
            for name in names:  # warm-up: probes, the session's start, caches
                _timed(variants[name], 3)
            means: dict[str, list[float]] = {name: [] for name in names}
            for r in range(rounds):
                order = names[r % len(names):] + names[: r % len(names)]
                for name in order:
                    means[name].append(_timed(variants[name], commands))
        first = [_first_command_ms(workspace) for _ in range(5)]
    medians = {name: statistics.median(values) for name, values in means.items()}
    base = medians["none"]
    rows = {
        name: {"ms_per_command": round(value, 3), "minus_none_ms": round(value - base, 3),
               "ratio_to_none": round(value / base, 3), "round_means_ms":
                   [round(v, 3) for v in means[name]]}
        for name, value in medians.items()
    }
    starts = [f for f in first if f is not None]
    return {"commands": commands, "rounds": rounds, "variants": rows,
            "session_first_command_ms": round(statistics.median(starts), 3) if starts else None}


def _print(report: dict[str, Any], out: Callable[[str], None] = print) -> None:
    out(f"{report['commands']} x `true` per round, {report['rounds']} rounds, median of means")
    out(f"{'variant':20} {'ms/command':>11} {'- none ms':>10} {'ratio':>7}")
    for name, row in report["variants"].items():
        out(f"{name:20} {row['ms_per_command']:>11.3f} {row['minus_none_ms']:>10.3f} "
            f"{row['ratio_to_none']:>7.2f}")
    if report["session_first_command_ms"] is not None:
        out(f"first command of an execution (bwrap-session, sandbox start included): "
            f"{report['session_first_command_ms']:.1f} ms")
    session = report["variants"].get("bwrap-session")
    if session is not None:
        verdict = "met" if session["minus_none_ms"] <= 2.0 else "MISSED"
        out(f"target bwrap-session - none <= 2 ms: {verdict} ({session['minus_none_ms']:.2f} ms)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # the unconfined variant warns on every command
    report = measure(args.commands, args.rounds)
    _print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
