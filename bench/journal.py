"""The journal's own cost per step: buffered (what a loop uses) against write-through, one run.

Run from the repository root (about half a minute on 2 cores)::

    .venv/bin/python -m bench.journal
    .venv/bin/python -m bench.journal --postgres postgresql://postgres@127.0.0.1:5432/test

One step is what a turn with one tool call hands the journal: ``model_request``,
``model_response`` (with the message a resume rebuilds), ``usage``, ``tool_call``, the call's
record and checkpoint (a :class:`~services.db.checkpoints.CallWrite`) and ``tool_result``. The same
steps go to a :class:`~services.db.journal.DbEventSink` in two modes, interleaved, ``--reps``
times (medians reported):

- ``write-through``: every event its own transaction, the record and checkpoint one more (what
  the journal did before it was buffered: the baseline);
- ``buffered``: commits at ``tool_call`` and ``tool_result`` only, the record and checkpoint
  riding along (on PostgreSQL one ``studio_journal_commit`` call each).

Reported: milliseconds per step and commits per step for each, and the ratio. Results go to
``bench/results/journal.json`` (git-ignored); the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # ``python bench/journal.py``: make ``bench`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sqlalchemy import event  # noqa: E402

from services.db import migrate  # noqa: E402
from services.db.checkpoints import CallWrite, Checkpoint  # noqa: E402
from services.db.executions import ExecutionRepository  # noqa: E402
from services.db.journal import DbEventSink  # noqa: E402
from services.db.redaction import Redactor  # noqa: E402
from services.db.session import Database, create_db_engine  # noqa: E402
from services.execution.ports import AgentEvent, AgentEventKind  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "journal.json"
PATCH = b"diff --git a/notes.txt b/notes.txt\n" + b"+a line of notes\n" * 40


def step_events(execution_id: str, cycle: int) -> list[tuple[AgentEventKind, dict[str, Any]]]:
    call = {"call_id": f"{cycle}-0", "tool_name": "command_run", "domain": "command",
            "operation": "run", "args": {"argv": ["true", str(cycle)]}}
    envelope = {"ok": True, "call_id": call["call_id"], "tool_name": "command_run",
                "domain": "command", "operation": "run", "duration_ms": 1.2,
                "request_id": "r", "correlation_id": execution_id,
                "result": {"exit_code": 0, "stdout": "", "stderr": ""}}
    message = {"role": "assistant", "parts": [{"kind": "tool_call", **call}]}
    return [
        (AgentEventKind.MODEL_REQUEST, {"messages": 2 * cycle + 1, "tools": 20}),
        (AgentEventKind.MODEL_RESPONSE, {"text": "", "tool_calls": [call], "stop_reason": "tool",
                                         "response_id": f"resp-{cycle}", "message": message}),
        (AgentEventKind.USAGE, {"delta": {"input_tokens": 0, "output_tokens": 0, "cost_usd": 0},
                                "total": {"input_tokens": 0, "output_tokens": 0,
                                          "cost_usd": 0}, "semantic": "per_call"}),
        (AgentEventKind.TOOL_CALL, {"call": call}),
        (AgentEventKind.TOOL_RESULT, {"call": call, "envelope": envelope, "provider": "codex"}),
    ]


def run_steps(db: Database, buffered: bool, steps: int) -> tuple[float, int]:
    """Seconds per step and commits per step for one execution of ``steps`` steps."""
    execution_id = ExecutionRepository(db, Redactor()).create(
        provider="replay", model="scripted", prompt="bench journal")
    sink = DbEventSink(db, Redactor(), lease_epoch=0, buffered=buffered)
    commits = 0

    def count(*_args: Any) -> None:
        nonlocal commits
        commits += 1

    def autocommit(conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        if "studio_journal_commit" in text:
            count()

    event.listen(db.engine, "commit", count)
    event.listen(db.engine, "before_cursor_execute", autocommit)
    started = time.perf_counter()
    try:
        for cycle in range(steps):
            for kind, data in step_events(execution_id, cycle):
                if kind is AgentEventKind.TOOL_RESULT:
                    checkpoint = Checkpoint("0" * 40, PATCH + str(cycle).encode(),
                                            len(PATCH), f"{cycle:064d}")
                    sink.defer(execution_id, CallWrite(execution_id, f"{cycle}-0",
                                                       data["envelope"], checkpoint, 0, "bench"))
                sink.emit(AgentEvent(kind, execution_id, cycle, data))
        sink.close()
        elapsed = time.perf_counter() - started
    finally:
        event.remove(db.engine, "commit", count)
        event.remove(db.engine, "before_cursor_execute", autocommit)
    return elapsed / steps, round(commits / steps)


def measure(db: Database, name: str, steps: int, reps: int) -> dict[str, Any]:
    run_steps(db, True, 5)  # warm-up of both paths
    run_steps(db, False, 5)
    times: dict[bool, list[float]] = {True: [], False: []}
    commits: dict[bool, int] = {}
    for rep in range(reps):
        for mode in ((True, False) if rep % 2 == 0 else (False, True)):
            per_step, per_step_commits = run_steps(db, mode, steps)
            times[mode].append(per_step)
            commits[mode] = per_step_commits
    write_through = statistics.median(times[False]) * 1000
    buffered = statistics.median(times[True]) * 1000
    return {"database": name, "steps": steps, "reps": reps,
            "write_through_ms": write_through, "buffered_ms": buffered,
            "ratio": buffered / write_through,
            "write_through_commits": commits[False], "buffered_commits": commits[True]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--postgres", help="a PostgreSQL admin URL (database `test`)")
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="studio-bench-journal-") as tmp:
        db = Database(create_db_engine(f"sqlite:///{Path(tmp) / 'studio.db'}"))
        migrate.upgrade(db.engine)
        results.append(measure(db, "sqlite", args.steps, args.reps))
        db.dispose()
    if args.postgres:
        import psycopg

        name = f"studio_bench_journal_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(args.postgres, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = "postgresql+psycopg://" + args.postgres.split("://", 1)[1].rsplit("/", 1)[0] \
            + f"/{name}"
        try:
            db = Database(create_db_engine(url))
            migrate.upgrade(db.engine)
            results.append(measure(db, "postgresql", args.steps, args.reps))
            db.dispose()
        finally:
            with psycopg.connect(args.postgres, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"{'database':<12}{'write-through':>16}{'buffered':>12}{'ratio':>8}"
          f"{'commits w-t':>13}{'buffered':>10}")
    for r in results:
        print(f"{r['database']:<12}{r['write_through_ms']:>13.2f} ms{r['buffered_ms']:>9.2f} ms"
              f"{r['ratio']:>8.2f}{r['write_through_commits']:>13}{r['buffered_commits']:>10}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
