"""Per-step cost of tracing: the same agent loop with spans exported over OTLP/HTTP, and off.

Run from the repository root (about a minute on 2 cores)::

    .venv/bin/python -m bench.tracing_overhead
    .venv/bin/python bench/tracing_overhead.py --reps 7 --steps 20,100

The loop is the step-overhead harness (:mod:`bench.overhead_turns`, codex over the Responses wire,
``command.run`` each step, no sandbox so that the commands' own cost does not drown the
difference). *On*: the SDK set up by :func:`services.telemetry.tracing.configure` exporting to the
local OTLP/HTTP receiver (``tests/support/otlp_receiver.py``), which runs in a process of its own
(its protobuf decoding must not share this process's GIL); every step makes a ``chat`` and an
``execute_tool`` span. *Off*: what a process without an endpoint runs (no tracer; every span a
no-op). Both in this process, interleaved (the order alternating) so both see the same load;
medians reported. Target: on costs at most **0.3 ms per step** more than off, in wall time and
in CPU time (the whole process: the exporter's thread included; on a loaded machine the wall-time
difference is mostly noise, the CPU-time one much less).

Results go to ``bench/results/tracing_overhead.json`` (git-ignored). The exit status is 0
whatever the numbers: this is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python bench/tracing_overhead.py``: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import overhead_turns  # noqa: E402
from bench.overhead_common import RunTiming, median_of  # noqa: E402
from bench.step_overhead import _pair  # noqa: E402
from services.execution.sandbox.selection import select_sandbox  # noqa: E402
from services.telemetry import tracing  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "tracing_overhead.json"
TARGET_MS = 0.3
WIRE = "responses"


def _receiver_process(conn: Connection) -> None:
    from tests.support.otlp_receiver import otlp_receiver

    with otlp_receiver() as receiver:
        conn.send(receiver.url)
        while conn.recv() == "count":
            conn.send(len(receiver.snapshot()))


def _start_receiver() -> tuple[multiprocessing.process.BaseProcess, Connection, str]:
    parent, child = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=_receiver_process, args=(child,),
                                                          daemon=True)
    process.start()
    url: str = parent.recv()
    return process, parent, url


def per_span_us(tracer: Any, n: int = 5000) -> dict[str, float]:
    """CPU microseconds of one span of the engine's size (12 attributes), on (exported, the
    flush included) and off: the steps' difference without the loop's noise around it."""
    attributes = {f"studio.bench_{i}": "x" * 24 for i in range(10)}
    found = {}
    for name, current in (("on", tracer), ("off", None)):
        tracing._tracer = current
        started = time.process_time()
        for _ in range(n):
            with tracing.span("chat bench", attributes) as span:
                span.set_attribute("gen_ai.usage.input_tokens", 1)
                span.set_attribute("gen_ai.usage.output_tokens", 1)
            if current is not None and _ % 500 == 499:
                tracing.flush()  # the batch queue holds 2048: never drop one
        tracing.flush()
        found[f"{name}_cpu_us"] = (time.process_time() - started) / n * 1e6
    return found


def run(reps: int, steps: tuple[int, ...]) -> dict[str, Any]:
    # the unconfined-commands warning of sandbox "none", once per command: not this bench's news
    logging.getLogger("services.execution.sandbox").setLevel(logging.ERROR)
    process, conn, url = _start_receiver()
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = url  # read by the exporter
    tracing.configure("studio-bench", endpoint_set=True, name_set=False)
    tracer = tracing._tracer  # the bench switches the module's tracer: on, and off (None)
    sandbox = select_sandbox("none")
    rows = []
    gc.collect()
    gc.freeze()
    with tempfile.TemporaryDirectory(prefix="bench-ws-") as tmp:
        workspace = Path(tmp)

        def traced(n: int) -> RunTiming:
            tracing._tracer = tracer
            try:
                return overhead_turns.harness(WIRE, sandbox, n, workspace)
            finally:
                tracing.flush()  # exported before the next run starts (not timed)

        def untraced(n: int) -> RunTiming:
            tracing._tracer = None
            return overhead_turns.harness(WIRE, sandbox, n, workspace)

        _pair(1, 3, traced, untraced)  # warm-up: imports, first connections
        for n in steps:
            on, off = _pair(reps, n, traced, untraced)
            row = {
                "steps": n, "on_ms": median_of(on, lambda r: r.per_step_ms),
                "off_ms": median_of(off, lambda r: r.per_step_ms),
                "on_cpu_ms": median_of(on, lambda r: r.cpu_per_step_ms),
                "off_cpu_ms": median_of(off, lambda r: r.cpu_per_step_ms),
            }
            row["delta_ms"] = row["on_ms"] - row["off_ms"]
            row["delta_cpu_ms"] = row["on_cpu_ms"] - row["off_cpu_ms"]
            rows.append(row)
            print(f"  N={n:<4} on {row['on_ms']:7.2f}  off {row['off_ms']:7.2f}  "
                  f"delta {row['delta_ms']:+6.3f} ms/step (cpu {row['delta_cpu_ms']:+6.3f})",
                  flush=True)
    spans_cost = per_span_us(tracer)
    print(f"  one span: on {spans_cost['on_cpu_us']:.1f} us CPU, off "
          f"{spans_cost['off_cpu_us']:.2f} us CPU (a step makes two: chat, execute_tool)")
    conn.send("count")
    spans = conn.recv()
    conn.send("stop")
    process.join(5)
    met = all(r["delta_ms"] <= TARGET_MS and r["delta_cpu_ms"] <= TARGET_MS for r in rows)
    print(f"\n  [{'MET ' if met else 'MISS'}] tracing on within {TARGET_MS} ms/step of off (wall "
          f"and CPU); {spans} spans received; load average "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return {"generated_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "load_average": os.getloadavg(), "reps": reps, "rows": rows,
            "spans_received": spans, "per_span": spans_cost, "target_ms": TARGET_MS,
            "met": met}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions per measure (median)")
    parser.add_argument("--steps", default="20,100", help="step counts, comma-separated")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    steps = tuple(int(s) for s in args.steps.split(",") if s.strip())
    report = run(max(1, args.reps), steps)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"results: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
