"""``studio eval`` over Celery workers: N tasks on two workers against the same N on one.

A suite of N tasks (default 6) is built in a temporary directory; each task's replay trajectory
runs ``sleep --task-s`` (default 8 s: what a model's replies take, which a worker spends
waiting) and writes its fix; a hidden test grades it. Each round records an eval run in a fresh
PostgreSQL database and runs it with :class:`services.evals.runner.EvalRunner`, its executions
sent through Redis to real ``studio worker --concurrency 1`` processes: one after another (one
worker, eval concurrency 1: each task dispatched, run and graded before the next), then over two
workers (eval concurrency 2). The rounds alternate (one, two, two, one, ...)
so both see the same load. Reported: the wall time of each round (from the first dispatch to the
last grade), the median per setting, and the ratio two/one.

    python bench/eval_workers.py                  # N = 6, 2 repetitions of each (~5 min)
    python bench/eval_workers.py --tasks 8 --reps 3

Target (issue 34): two workers take at most 0.6 of the time of one. The exit status is 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integration.celery_fixtures import Broker, claimed_broker, start_worker  # noqa: E402
from tests.integration.databases import (  # noqa: E402
    admin_conninfo,
    create_migrated_pg_database,
    drop_pg_database,
)
from tests.support.settings import studio_settings  # noqa: E402

from services.db.session import open_database  # noqa: E402
from services.evals.matrix import build_matrix  # noqa: E402
from services.evals.runner import EvalRunner, RunnerOptions  # noqa: E402
from services.evals.suite import load_directory  # noqa: E402
from services.worker.dispatch import dispatch_execution  # noqa: E402

TARGET = 0.6
DONE = json.dumps({"status": "success", "summary": "done", "changes": [], "issues": [],
                   "questions": []})


def build_suite(root: Path, tasks: int, task_s: float) -> Path:
    for number in range(tasks):
        folder = root / "tasks" / f"t{number:02d}"
        (folder / "repo").mkdir(parents=True)
        (folder / "hidden").mkdir()
        (folder / "repo" / "value.py").write_text("VALUE = 0\n")
        (folder / "hidden" / "test_value.py").write_text(
            "import unittest\n\nimport value\n\n\nclass T(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(value.VALUE, 1)\n")
        turns = [{"tool_calls": [{"tool": "command.run",
                                  "args": {"argv": ["sleep", str(task_s)]}}]},
                 {"tool_calls": [{"tool": "workspace.write_file",
                                  "args": {"path": "value.py", "content": "VALUE = 1\n"}}]},
                 {"final": DONE}]
        (folder / "replay.json").write_text(json.dumps({"turns": turns}))
        (folder / "task.json").write_text(json.dumps({
            "prompt": f"Set VALUE to 1 (task {number}).",
            "fail_to_pass": ["test_value.T.test_value"]}))
    (root / "suite.json").write_text(json.dumps({"name": "bench"}))
    return root


def one_round(workers: int, suite_dir: Path, admin: str, broker: Broker, root: Path) -> float:
    url = create_migrated_pg_database(admin)
    data = root / f"data-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATABASE_URL=url, STUDIO_BROKER_URL=broker.url,
               STUDIO_WORKER_QUEUE=broker.queue, STUDIO_DATA_DIR=str(data),
               STUDIO_WORKSPACE_DIR=str(root / "workspaces"), HOME=str(root))
    settings = studio_settings(data, database_url=url, broker_url=broker.url,
                               worker_queue=broker.queue)
    started = [start_worker(env, root / f"worker-{n}.log", "--concurrency", "1")
               for n in range(workers)]
    db = open_database(settings)
    try:
        time.sleep(3)  # the workers connect to the broker
        suite = load_directory(suite_dir)
        runner = EvalRunner(db, settings, lambda eid: dispatch_execution(eid, settings),
                            RunnerOptions(concurrency=workers, poll_s=0.1))
        run_id = runner.start(suite, build_matrix(None, None, None, 1))
        began, began_at = time.monotonic(), time.time()
        items = runner.run(run_id, suite)
        wall = time.monotonic() - began
        for item in items:  # when each execution ran and was graded, from the start
            row = runner.executions.get(item.execution_id or "")
            if row is not None and row.started_at and row.finished_at and item.graded_at:
                created = row.created_at.timestamp() - began_at
                print(f"    {item.key.task_id}: created {created:5.1f}"
                      f" started {row.started_at.timestamp() - began_at:5.1f} finished "
                      f"{row.finished_at.timestamp() - began_at:5.1f} graded "
                      f"{item.graded_at.timestamp() - began_at:5.1f}", flush=True)
        unresolved = [i.key.task_id for i in items if not (i.grade and i.grade.resolved)]
        if unresolved:
            print(f"  unresolved: {unresolved}", file=sys.stderr)
        return wall
    finally:
        db.dispose()
        for worker in started:
            worker.stop()
        drop_pg_database(admin, url)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=6)
    parser.add_argument("--task-s", type=float, default=8.0)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/eval_workers.json")
    args = parser.parse_args()
    admin = admin_conninfo()
    if admin is None:
        print("no PostgreSQL administrator login: nothing measured", file=sys.stderr)
        return 0
    times: dict[int, list[float]] = {1: [], 2: []}
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp, claimed_broker() as broker:
        suite_dir = build_suite(Path(tmp) / "suite", args.tasks, args.task_s)
        for rep in range(args.reps):
            for workers in ((1, 2) if rep % 2 == 0 else (2, 1)):
                wall = one_round(workers, suite_dir, admin, broker, Path(tmp))
                times[workers].append(wall)
                print(f"  {args.tasks} tasks, {workers} worker(s): {wall:.1f} s", flush=True)
    one, two = statistics.median(times[1]), statistics.median(times[2])
    ratio = two / one
    print(f"one worker {one:.1f} s, two workers {two:.1f} s: ratio {ratio:.2f} "
          f"(target <= {TARGET}: {'MET' if ratio <= TARGET else 'MISS'}); load {load:.1f} at "
          f"start, {os.getloadavg()[0]:.1f} at end, {os.cpu_count()} CPUs")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"tasks": args.tasks, "task_s": args.task_s,
                                    "times": times, "ratio": ratio}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
