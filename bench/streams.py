"""What open SSE streams cost the API: ``/healthz`` p95, the list's latency and the API's memory
with 500 clients following one running execution, next to the same API with none (same run).

Run from the repository root (about a minute on 2 cores)::

    .venv/bin/python -m bench.streams
    .venv/bin/python bench/streams.py --streams 500 --sqlite

A real ``studio api`` (uvicorn, one process) serves a fresh PostgreSQL database (127.0.0.1:5432,
made for the run and dropped after it; ``--sqlite`` for a file instead). This process records one
execution as running and appends a journal event to it every 0.1 s (a running execution's pace
of tool calls and results) for the whole measurement. Then:

1. **baseline**: no stream open; ``GET /healthz`` (``--health-reqs`` times) and
   ``GET /api/executions`` (``--list-reqs`` times), one after the other over one kept-alive
   connection; the API's resident memory (``VmRSS``);
2. **loaded**: ``--streams`` clients (in a separate process, so that reading them does not compete
   with the measuring client for this process's interpreter) open
   ``GET /api/executions/{id}/events`` and keep reading; once all are open, the same
   measurements again;
3. the execution is finished; every client must then receive the ``end`` event (checked: the
   script reports how many did, and how many events each received on average).

Targets (issue 14): with 500 streams, ``/healthz`` p95 under 100 ms, the list under 250 ms
(p95), the API's memory up by less than 100 MiB. Results go to ``bench/results/streams.json``
(git-ignored); the exit status is 0 whatever the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results" / "streams.json"
PG_ADMIN = "postgresql://{user}@127.0.0.1:5432/test"
LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")
TARGETS = {"healthz_p95_ms": 100.0, "list_p95_ms": 250.0, "rss_delta_mib": 100.0}
EVENT_EVERY_S = 0.1


# -- the database -----------------------------------------------------------------------------
def _pg_database() -> tuple[str, str] | None:
    """A fresh PostgreSQL database: (its SQLAlchemy URL, the admin conninfo), or None."""
    import psycopg

    for user in ("postgres", "root"):
        admin = PG_ADMIN.format(user=user)
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=3) as conn:
                name = f"studio_bench_streams_{uuid.uuid4().hex[:10]}"
                conn.execute(f'CREATE DATABASE "{name}"')
                return f"postgresql+psycopg://{user}@127.0.0.1:5432/{name}", admin
        except psycopg.OperationalError:
            continue
    return None


def _drop_pg(url: str, admin: str) -> None:
    import psycopg

    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{url.rsplit("/", 1)[1]}" WITH (FORCE)')


# -- the API ----------------------------------------------------------------------------------
def _start_api(env: dict[str, str]) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "services.cli", "api", "--host", "127.0.0.1", "--port", "0",
         "--log-level", "info"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: list[int] = []
    ready = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            match = LISTENING.search(line)
            if match:
                found.append(int(match.group(1)))
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    ready.wait(60)
    if not found:
        process.kill()
        raise SystemExit("studio api did not start")
    return process, found[0]


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _latencies(port: int, path: str, token: str, count: int) -> list[float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    out = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
            response = conn.getresponse()
            response.read()
            out.append((time.perf_counter() - start) * 1000)
            if response.status != 200:
                raise SystemExit(f"GET {path}: {response.status}")
    finally:
        conn.close()
    return out


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) > 1 else values[0]


def _measure(port: int, token: str, pid: int, health_reqs: int, list_reqs: int
             ) -> dict[str, float]:
    health = _latencies(port, "/healthz", token, health_reqs)
    listed = _latencies(port, "/api/executions?limit=50", token, list_reqs)
    return {"healthz_p50_ms": statistics.median(health), "healthz_p95_ms": _p95(health),
            "list_p50_ms": statistics.median(listed), "list_p95_ms": _p95(listed),
            "rss_mib": _rss_mib(pid)}


# -- the stream clients (a process of their own) ----------------------------------------------
async def _one_stream(port: int, path: str, token: str, counts: dict[str, int],
                      opened: asyncio.Event, total: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                 "Accept: text/event-stream\r\n\r\n".encode())
    await writer.drain()
    await reader.readuntil(b"\r\n\r\n")
    counts["open"] += 1
    if counts["open"] == total:
        opened.set()
    events = 0
    try:
        while True:
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"event: "):
                events += 1
                if line.strip() == b"event: end":
                    counts["ended"] += 1
                    break
    finally:
        counts["events"] += events
        writer.close()


async def _streams(port: int, path: str, token: str, total: int, pipe: Connection) -> None:
    counts = {"open": 0, "ended": 0, "events": 0}
    opened = asyncio.Event()
    tasks = []
    for _ in range(total):
        tasks.append(asyncio.create_task(_one_stream(port, path, token, counts, opened, total)))
        await asyncio.sleep(0.002)
    await asyncio.wait_for(opened.wait(), 120)
    pipe.send(("open", counts["open"]))
    await asyncio.gather(*tasks, return_exceptions=True)
    pipe.send(("done", counts))


def _stream_process(port: int, path: str, token: str, total: int, pipe: Connection) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, total * 2 + 100)), hard))
    asyncio.run(_streams(port, path, token, total, pipe))


# -- the running execution --------------------------------------------------------------------
class Writer(threading.Thread):
    """Appends a journal event every :data:`EVENT_EVERY_S` until stopped."""

    def __init__(self, db: Any, execution_id: str) -> None:
        super().__init__(daemon=True)
        self.db, self.execution_id = db, execution_id
        self.stop = threading.Event()
        self.written = 0

    def run(self) -> None:
        from services.db.journal import DbEventSink
        from services.execution.ports import AgentEvent, AgentEventKind

        sink = DbEventSink(self.db)
        while not self.stop.wait(EVENT_EVERY_S):
            self.written += 1
            sink.emit(AgentEvent(AgentEventKind.WARNING, self.execution_id, self.written,
                                 {"code": "bench", "message": f"event {self.written}"}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=500)
    parser.add_argument("--health-reqs", type=int, default=200)
    parser.add_argument("--list-reqs", type=int, default=60)
    parser.add_argument("--sqlite", action="store_true", help="a SQLite file, not PostgreSQL")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from services.db import migrate
    from services.db.api_tokens import ApiTokenRepository
    from services.db.executions import ExecutionRepository
    from services.db.redaction import Redactor
    from services.db.session import Database, create_db_engine
    from services.runs.request import ExecutionRequest, create_execution
    from services.settings import StudioSettings

    root = Path(tempfile.mkdtemp(prefix="studio-bench-streams-"))
    pg = None if args.sqlite else _pg_database()
    url = pg[0] if pg else f"sqlite:///{root / 'studio.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATABASE_URL=url, STUDIO_DATA_DIR=str(root / "data"),
               STUDIO_WORKSPACE_DIR=str(root / "workspaces"), HOME=str(root))
    db = Database(create_db_engine(url))
    migrate.upgrade(db.engine)
    process, port = _start_api(env)
    writer: Writer | None = None
    try:
        token = ApiTokenRepository(db).create("bench", ["read"])[1]
        settings = StudioSettings(database_url=url, data_dir=root / "data",
                                  workspace_dir=root / "workspaces")
        (root / "ws").mkdir()
        execution_id = create_execution(
            db, ExecutionRequest(provider="replay", prompt="bench", workspace=root / "ws"),
            Redactor(), settings=settings)
        repository = ExecutionRepository(db)
        repository.mark_running(execution_id)
        writer = Writer(db, execution_id)
        writer.start()
        time.sleep(1)
        baseline = _measure(port, token, process.pid, args.health_reqs, args.list_reqs)

        ours, theirs = multiprocessing.Pipe()
        clients = multiprocessing.Process(target=_stream_process, args=(
            port, f"/api/executions/{execution_id}/events", token, args.streams, theirs))
        clients.start()
        kind, opened = ours.recv()
        time.sleep(2)  # every stream past its catch-up, following live
        loaded = _measure(port, token, process.pid, args.health_reqs, args.list_reqs)

        writer.stop.set()
        writer.join()
        repository.finish(execution_id, status="succeeded", outcome="completed",
                          result={}, usage={}, cost_usd=0.0, iterations=0)
        done = ours.recv()[1] if ours.poll(120) else {"ended": 0, "events": 0}
        clients.join(30)
    finally:
        if writer is not None:
            writer.stop.set()
        process.terminate()
        process.wait(15)
        db.dispose()
        if pg is not None:
            _drop_pg(*pg)
    report(args, baseline, loaded, opened, done, writer.written if writer else 0, url)


def report(args: argparse.Namespace, baseline: dict[str, float], loaded: dict[str, float],
           opened: int, done: dict[str, int], written: int, url: str) -> None:
    rss_delta = loaded["rss_mib"] - baseline["rss_mib"]
    verdicts = {
        "healthz_p95_ms": loaded["healthz_p95_ms"] < TARGETS["healthz_p95_ms"],
        "list_p95_ms": loaded["list_p95_ms"] < TARGETS["list_p95_ms"],
        "rss_delta_mib": rss_delta < TARGETS["rss_delta_mib"],
    }
    result = {"streams": args.streams, "opened": opened, "ended": done["ended"],
              "events_per_stream": done["events"] / max(1, args.streams),
              "events_written": written, "database": url.split(":", 1)[0],
              "baseline": baseline, "loaded": loaded, "rss_delta_mib": rss_delta,
              "ratios": {k: loaded[k] / baseline[k] for k in baseline if baseline[k]},
              "targets": TARGETS, "met": verdicts, "loadavg": os.getloadavg()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(f"{args.streams} streams on one running execution ({result['database']}); "
          f"opened {opened}, ended {done['ended']}, "
          f"{result['events_per_stream']:.1f} events each ({written} written)")
    print(f"{'':22}{'baseline':>10}{'loaded':>10}{'ratio':>8}")
    for key in ("healthz_p50_ms", "healthz_p95_ms", "list_p50_ms", "list_p95_ms", "rss_mib"):
        print(f"{key:22}{baseline[key]:10.1f}{loaded[key]:10.1f}"
              f"{loaded[key] / baseline[key]:8.2f}")
    for key, met in verdicts.items():
        value = rss_delta if key == "rss_delta_mib" else loaded[key]
        print(f"target {key} < {TARGETS[key]:.0f}: {value:.1f} {'MET' if met else 'MISS'}")
    print(f"load average {os.getloadavg()[0]:.2f}; results in {args.out}")


if __name__ == "__main__":
    main()
