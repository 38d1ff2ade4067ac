"""The product path, side by side in one run: ``studio run`` as a user runs it, against its floors.

Every loop talks to a scripted model server in a process of its own (:mod:`bench.overhead_common`)
that asks N times (default 50) for a command running ``true`` and then answers a final text; the
step time is the gap between consecutive model requests at that server, measured the same way for
every loop. Measured, in this order, each ``--reps`` times (median reported):

* **physical floor**: a hand-written HTTP loop (one keep-alive connection, the codex Responses
  wire) spawning ``true`` per step (:func:`bench.overhead_turns.floor`), no sandbox;
* **durable floor**: the same loop committing one row per step to the same database as the
  ``studio run`` it is compared with: SQLite (a file, WAL, ``synchronous=NORMAL``) and
  PostgreSQL (one ``INSERT`` and ``COMMIT`` per step over one connection);
* **mini-swe-agent**, installed with pip into a temporary virtualenv at bench time (litellm,
  local environment; it parses a fenced ``bash`` block out of a text answer, so its script
  answers text);
* **studio run** end to end (``python -m services.cli run --workspace``: CLI start, the
  database, the journal, the loop, the provider SDK over real HTTP) for codex, gemini and claude,
  on SQLite and on PostgreSQL, sandbox ``none`` and ``auto``.

    python bench/product_path.py                      # everything, 50 steps, 1 rep (~5 min)
    python bench/product_path.py --steps 10 --providers codex --dbs sqlite --sandboxes none
    python bench/product_path.py --reps 3             # the documented run
    python bench/product_path.py --round-trips codex  # PostgreSQL round trips per step
    python bench/product_path.py --calls codex:sqlite  # Python calls per step (load-free)
    python bench/product_path.py --cpu codex:sqlite,codex:postgresql --baseline ../main
    python bench/product_path.py --instructions codex:sqlite --steps 35 --baseline ../main

``--round-trips PROVIDER`` runs only that provider's ``studio run`` on PostgreSQL, through a proxy
that reads the wire protocol (:mod:`bench.pg_wire`), and prints the round trips per step between
its first and last model request by what they carried, then the durable floor's through the same
proxy.

``--calls PROVIDER:DB,...`` runs only those ``studio run`` (sandbox ``none``) through
:mod:`bench.step_calls` and prints the Python calls (functions and built-ins) per step between its
first and last model request: a count that does not move with the machine's load, for comparing
two trees. ``--cpu PROVIDER:DB,...`` measures instead, in the process, the CPU time per step of
``studio`` itself and of the commands it ran (``--rounds`` runs each, default 5, medians).
``--instructions PROVIDER:DB,...`` runs them under valgrind's cachegrind at 5 steps and at
``--steps`` and prints the instructions per step (the difference over the extra steps: start-up
and exit cancel out; minutes a run). ``--baseline DIR``: another checkout (``git worktree add``
or ``git archive | tar -x``) run the same way right before each run of this tree, its sources
first on ``PYTHONPATH``; the ratios are this tree's over the baseline's.

Targets (issue 12): codex and gemini, sandbox ``none``, per step <= 2x the durable floor of the
same database and below mini-swe-agent's; sandboxed minus unsandboxed <= 2 ms. Issue 35: <= 3x
the durable floor, on PostgreSQL as on SQLite. The exit status is
0 whatever the numbers. Results also go to ``bench/results/product_path.json`` (git-ignored).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from tests.support.model_script import Step, text, tool_calls  # noqa: E402
from tests.support.model_server import ScriptedModelServer  # noqa: E402

from bench import overhead_turns  # noqa: E402
from bench.overhead_common import (  # noqa: E402
    API_KEY,
    FINAL,
    TOOL,
    Clock,
    FloorCommand,
    Stamps,
    neutral_tools,
    step_argv,
)
from services.execution.prompts import system_prompt  # noqa: E402
from services.execution.providers.claude_tools import allowed_tool_name  # noqa: E402
from services.execution.sandbox.selection import select_sandbox  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "product_path.json"
PG_ADMIN = ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://root@127.0.0.1:5432/test")
TASK = "Run `true` until told to stop, then answer."
MSA_PACKAGE = "mini-swe-agent==2.4.6"
_FORK = multiprocessing.get_context("fork")
Script = Callable[[int, Stamps], list[Step]]


# ------------------------------------------------------------------ the scripted server
def tool_script(tool_name: str) -> Script:
    def make(n: int, stamps: Stamps) -> list[Step]:
        steps = [stamps.wrap(tool_calls([(tool_name, {"argv": step_argv(i)})]))
                 for i in range(n)]
        return [*steps, stamps.wrap(text(FINAL))]
    return make


def msa_script(n: int, stamps: Stamps) -> list[Step]:
    """mini-swe-agent 2's protocol: a ``bash`` tool call per answer; the last one submits."""
    steps = [stamps.wrap(tool_calls([("bash", {"command": f"true {i}"})])) for i in range(n)]
    done = tool_calls([("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"})])
    return [*steps, stamps.wrap(done)]


def _serve(conn: Connection, n: int, make: Script) -> None:
    stamps = Stamps()
    with ScriptedModelServer(make(n, stamps)) as server:
        conn.send(server.url)
        conn.recv()
        unmatched = len(server.unmatched)
    conn.send((stamps.times, unmatched))


@dataclass
class Served:
    url: str = ""
    times: list[float] = field(default_factory=list)
    unmatched: int = 0


@contextmanager
def served(n: int, make: Script) -> Iterator[Served]:
    parent, child = _FORK.Pipe()
    process = _FORK.Process(target=_serve, args=(child, n, make), daemon=True)
    process.start()
    found = Served()
    try:
        found.url = parent.recv()
        yield found
    finally:
        parent.send("stop")
        if parent.poll(30):
            found.times, found.unmatched = parent.recv()
        process.join(10)
        if process.is_alive():
            process.kill()
        parent.close()


@dataclass
class Measure:
    """One loop's run: per-step gaps between model requests (the first request excluded)."""

    label: str
    db: str
    sandbox: str
    gaps_ms: list[float]
    first_request_s: float
    rss_mib: list[float] = field(default_factory=list)
    cpu_ms: float = float("nan")  # CPU per step: the loop's process and its reaped commands

    @property
    def median_ms(self) -> float:
        return statistics.median(self.gaps_ms)

    @property
    def mean_ms(self) -> float:
        return statistics.fmean(self.gaps_ms)


def _gaps(server: Served, n: int, label: str) -> list[float]:
    times = server.times
    if len(times) != n + 1:
        raise RuntimeError(f"{label}: the server saw {len(times)} requests, expected {n + 1} "
                           f"({server.unmatched} unmatched)")
    return [(b - a) * 1000 for a, b in zip(times, times[1:], strict=False)]


# ------------------------------------------------------------------ floors
class DurableLog:
    """The durable floor's journal: one row per step, committed before the step goes on."""

    def __init__(self, db: str, where: Path) -> None:
        self.db = db
        if db == "sqlite":
            self.sqlite = sqlite3.connect(where / "floor.db", isolation_level=None)
            self.sqlite.execute("PRAGMA journal_mode=WAL")
            self.sqlite.execute("PRAGMA synchronous=NORMAL")
            self.sqlite.execute("CREATE TABLE IF NOT EXISTS steps (n INTEGER, body TEXT)")
        else:
            self.pg = psycopg.connect(pg_admin())
            table = f"bench_steps_{uuid.uuid4().hex[:10]}"
            self.table = table
            self.pg.execute(f"CREATE TABLE {table} (n integer, body text)")
            self.pg.commit()

    def commit(self, n: int, body: str) -> None:
        if self.db == "sqlite":
            self.sqlite.execute("BEGIN")
            self.sqlite.execute("INSERT INTO steps VALUES (?, ?)", (n, body))
            self.sqlite.execute("COMMIT")
        else:
            self.pg.execute(f"INSERT INTO {self.table} VALUES (%s, %s)", (n, body))  # noqa: S608
            self.pg.commit()

    def close(self) -> None:
        if self.db == "sqlite":
            self.sqlite.close()
        else:
            self.pg.execute(f"DROP TABLE {self.table}")
            self.pg.commit()
            self.pg.close()


def floor(n: int, db: str | None, workspace: Path) -> Measure:
    """The physical floor (``db`` None) or the durable floor on ``db``."""
    sandbox = select_sandbox("none")
    system = system_prompt("repository work", neutral_tools(), "")
    label = "physical floor" if db is None else "durable floor"
    with tempfile.TemporaryDirectory(prefix="bench-pp-floor-") as scratch, \
            served(n, tool_script(TOOL)) as server:
        journal = DurableLog(db, Path(scratch)) if db is not None else None
        command = FloorCommand(sandbox, workspace, Path(scratch))
        counter = iter(range(10**6))

        def run(argv: list[str]) -> dict[str, Any]:
            result = command.run(argv)
            if journal is not None:
                journal.commit(next(counter), json.dumps(result))
            return result

        wire = overhead_turns._Wire("responses", system)
        clock = Clock.start()
        conn = overhead_turns._connect(server.url)
        try:
            overhead_turns._floor_loop(wire, conn, run)
        finally:
            conn.close()
            if journal is not None:
                journal.close()
        cpu_s = clock.elapsed()[1]
    return Measure(label, db or "-", "none", _gaps(server, n, label), 0.0,
                   cpu_ms=cpu_s * 1000 / n)


# ------------------------------------------------------------------ mini-swe-agent
MSA_DRIVER = """
import sys
import yaml
from minisweagent.agents.default import DefaultAgent
from minisweagent.config import get_config_path
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel
url, n, cwd = sys.argv[1], int(sys.argv[2]), sys.argv[3]
config = yaml.safe_load(get_config_path("default").read_text())
agent_config = {**config.get("agent", {}), "step_limit": n + 5, "cost_limit": 0}
model = LitellmModel(**{**config.get("model", {}), "model_name": "openai/gpt-4o-mini",
                        "cost_tracking": "ignore_errors",
                        "model_kwargs": {"api_base": url + "/v1", "api_key": "bench-key"}})
env = LocalEnvironment(**{**config.get("environment", {}), "cwd": cwd})
agent = DefaultAgent(model, env, **agent_config)
agent.run("Run `true` until told to stop.")
"""


def msa_venv(root: Path, reuse: Path | None) -> Path:
    """A virtualenv with mini-swe-agent (pip, from the package registry), made once per run
    (``--msa-venv DIR``: an existing one)."""
    if reuse is not None:
        return reuse / "bin" / "python"
    venv = root / "msa-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", MSA_PACKAGE], check=True,
                   timeout=900)
    return venv / "bin" / "python"


def mini_swe_agent(n: int, python: Path, workspace: Path) -> Measure:
    with served(n, msa_script) as server:
        started = time.perf_counter()
        with _output_files() as (out_file, err_file):
            process = subprocess.Popen(
                [str(python), "-c", MSA_DRIVER, server.url, str(n), str(workspace)],
                stdout=out_file, stderr=err_file, text=True,
                env={**os.environ, "MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1",
                     "LITELLM_LOG": "ERROR"})
            rss, cpu = _watch(process)
            process.wait()
            err = _read(err_file)
    if process.returncode != 0 and len(server.times) != n + 1:
        raise RuntimeError(f"mini-swe-agent failed: {err[-3000:]}")
    first = server.times[0] - started if server.times else float("nan")
    return Measure("mini-swe-agent", "-", "none", _gaps(server, n, "mini-swe-agent"), first,
                   rss, _cpu_per_step(cpu, server.times, n))


# ------------------------------------------------------------------ studio run
def pg_admin() -> str:
    for conninfo in PG_ADMIN:
        try:
            with psycopg.connect(conninfo, connect_timeout=3):
                return conninfo
        except psycopg.OperationalError:
            continue
    raise RuntimeError("no PostgreSQL at 127.0.0.1:5432")


@contextmanager
def database(db: str, root: Path) -> Iterator[str]:
    """A fresh database URL for ``studio`` (SQLite file, or a new PostgreSQL database)."""
    if db == "sqlite":
        yield f"sqlite:///{root / f'studio-{uuid.uuid4().hex[:8]}.db'}"
        return
    with pg_database("bench_pp") as url:
        yield url


@contextmanager
def pg_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database named ``<prefix>_<random>``: its URL; dropped after."""
    admin = pg_admin()
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    user = admin.split("//", 1)[1].split("@", 1)[0]
    try:
        yield f"postgresql+psycopg://{user}@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def studio_env(root: Path, db_url: str, sandbox: str, url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(HOME=str(root / "home"), STUDIO_DATABASE_URL=db_url,
               STUDIO_DATA_DIR=str(root / "data"), STUDIO_SANDBOX=sandbox,
               OPENAI_BASE_URL=url + "/v1", OPENAI_API_KEY=API_KEY,
               GOOGLE_GEMINI_BASE_URL=url, GEMINI_API_KEY=API_KEY,
               ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY=API_KEY)
    return env


@contextmanager
def _output_files() -> Iterator[tuple[IO[str], IO[str]]]:
    """Files for a measured process's output: a pipe nobody reads while ``_watch`` samples
    would fill up (64 KiB) and stop a long run mid-way."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        yield out, err


def _read(file: IO[str]) -> str:
    file.seek(0)
    return file.read()


def _rss_mib(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def studio_run(n: int, provider: str, db: str, sandbox: str, root: Path,
               workspace: Path, profile: Path | None = None,
               via: Callable[[str], str] | None = None,
               served_times: list[float] | None = None,
               calls: Path | None = None, calls_cpu: bool = False,
               source: Path | None = None, wrapper: list[str] | None = None) -> Measure:
    """One ``studio run``; ``via`` rewrites its database URL (the counting proxy),
    ``served_times`` receives the model requests' arrival times, and ``calls`` (a file) runs it
    through :mod:`bench.step_calls`, which writes its Python calls per step there
    (``calls_cpu``: its CPU per step instead). ``source``: another checkout whose sources run
    instead of this tree's (first on ``PYTHONPATH``)."""
    tool = allowed_tool_name(TOOL) if provider == "claude" else TOOL
    label = f"studio run {provider}"
    (root / "home").mkdir(exist_ok=True)
    with database(db, root) as db_url, served(n, tool_script(tool)) as server:
        env = studio_env(root, via(db_url) if via else db_url, sandbox, server.url)
        if source is not None:
            env["PYTHONPATH"] = os.pathsep.join(
                [str(source / "app" / "backend" / "src"), *filter(None, [env.get("PYTHONPATH")])])
        if db != "sqlite":
            subprocess.run([sys.executable, "-m", "services.cli", "db", "upgrade"], env=env,
                           check=True, capture_output=True, timeout=300)
        started = time.perf_counter()
        profiler = ["-m", "cProfile", "-o", str(profile)] if profile is not None else []
        program = ([str(ROOT / "bench" / "step_calls.py"), *(["--cpu"] if calls_cpu else []),
                    str(calls)] if calls is not None else ["-m", "services.cli"])
        with _output_files() as (out_file, err_file):
            process = subprocess.Popen(
                [*(wrapper or []), sys.executable, *profiler, *program, "run", TASK,
                 "--workspace", str(workspace), "--provider", provider,
                 "--max-iterations", str(n + 10), "--json"],
                env=env, stdout=out_file, stderr=err_file, text=True)
            rss, cpu = _watch(process)
            process.wait()
            err = _read(err_file)
    if process.returncode != 0:
        raise RuntimeError(f"{label} ({db}, {sandbox}) failed: {err[-3000:]}")
    first = server.times[0] - started if server.times else float("nan")
    if served_times is not None:
        served_times.extend(server.times)
    return Measure(label, db, sandbox, _gaps(server, n, label), first, rss,
                   _cpu_per_step(cpu, server.times, n))


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float | None:
    """User + system time of ``pid`` and of its children it has reaped (its commands)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return sum(int(x) for x in fields[11:15]) / _TICK


def _watch(process: subprocess.Popen[str]) -> tuple[list[float], list[tuple[float, float]]]:
    """Until ``process`` ends: its resident memory and its CPU time, sampled every 20 ms."""
    rss: list[float] = []
    cpu: list[tuple[float, float]] = []
    while process.poll() is None:
        rss.append(_rss_mib(process.pid))
        used = _cpu_s(process.pid)
        if used is not None:
            cpu.append((time.perf_counter(), used))
        time.sleep(0.02)
    return rss, cpu


def _cpu_per_step(cpu: list[tuple[float, float]], times: list[float], n: int) -> float:
    """CPU ms per step between the first and the last model request (nearest samples)."""
    if len(times) < 2 or not cpu:
        return float("nan")

    def at(moment: float) -> float:
        return min(cpu, key=lambda sample: abs(sample[0] - moment))[1]

    return (at(times[-1]) - at(times[0])) * 1000 / n


# ------------------------------------------------------------------ the run
def median_measure(runs: list[Measure]) -> Measure:
    return sorted(runs, key=lambda m: m.median_ms)[len(runs) // 2]


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--providers", default="codex,gemini,claude")
    parser.add_argument("--dbs", default="sqlite,postgresql")
    parser.add_argument("--sandboxes", default="none,auto")
    parser.add_argument("--no-mini-swe-agent", action="store_true")
    parser.add_argument("--msa-venv", type=Path, default=None,
                        help="a virtualenv that already has mini-swe-agent (default: a new one)")
    parser.add_argument("--profile", metavar="PROVIDER:DB:SANDBOX", default=None,
                        help="only profile that studio run (cProfile) and print where it spends")
    parser.add_argument("--round-trips", metavar="PROVIDER", default=None,
                        help="only count the PostgreSQL round trips per step of that provider's "
                             "studio run (through a counting proxy) and print what they carry")
    parser.add_argument("--calls", metavar="PROVIDER:DB,...", default=None,
                        help="only count the Python calls per step of these studio runs "
                             "(bench/step_calls.py; independent of the load)")
    parser.add_argument("--cpu", metavar="PROVIDER:DB,...", default=None,
                        help="only measure the CPU per step of these studio runs, inside the "
                             "process (bench/step_calls.py --cpu)")
    parser.add_argument("--instructions", metavar="PROVIDER:DB,...", default=None,
                        help="only count the instructions per step of these studio runs under "
                             "valgrind's cachegrind (--steps minus 5 steps; slow)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="with --calls, --cpu or --instructions: a checkout run side by "
                             "side (its sources first on PYTHONPATH), before this tree")
    parser.add_argument("--rounds", type=int, default=None,
                        help="with --calls or --cpu: runs per tree (default 1, --cpu 5)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.profile:
        return profile_run(args.steps, *args.profile.split(":"))
    if args.instructions:
        return instructions_run(args.steps, _split(args.instructions), args.baseline)
    if args.calls or args.cpu:
        rounds = args.rounds or (5 if args.cpu else 1)
        return calls_run(args.steps, _split(args.cpu or args.calls), bool(args.cpu),
                         args.baseline, rounds)
    if args.round_trips:
        return round_trips_run(args.steps, args.round_trips)
    logging.getLogger("services").setLevel(logging.ERROR)  # the floors' "unconfined" warnings
    n = args.steps
    load = os.getloadavg()
    print(f"product path: {n} steps, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    rows: list[Measure] = []

    def measure(make: Callable[[], Measure]) -> None:
        runs = [make() for _ in range(args.reps)]
        rows.append(median_measure(runs))
        m = rows[-1]
        print(f"  {m.label:22} {m.db:10} {m.sandbox:5} median {m.median_ms:7.2f} "
              f"mean {m.mean_ms:7.2f} ms/step", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-pp-") as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        measure(lambda: floor(n, None, workspace))
        for db in _split(args.dbs):
            measure(lambda db=db: floor(n, db, workspace))  # type: ignore[misc]
        if not args.no_mini_swe_agent:
            python = msa_venv(root, args.msa_venv)
            measure(lambda: mini_swe_agent(n, python, workspace))
        for provider in _split(args.providers):
            for db in _split(args.dbs):
                for sandbox in _split(args.sandboxes):
                    measure(lambda p=provider, d=db, s=sandbox:  # type: ignore[misc]
                            studio_run(n, p, d, s, root, workspace))
    report(rows, load)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"steps": n, "load": load,
                                    "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


def profile_run(n: int, provider: str, db: str, sandbox: str) -> int:
    """One ``studio run`` under cProfile: its steps, and the functions the time goes to."""
    import pstats

    with tempfile.TemporaryDirectory(prefix="bench-pp-prof-") as tmp:
        root = Path(tmp)
        (root / "workspace").mkdir()
        out = root / "run.prof"
        m = studio_run(n, provider, db, sandbox, root, root / "workspace", profile=out)
        print(f"studio run {provider} {db} {sandbox}: median {m.median_ms:.2f} ms/step "
              f"(profiled: slower than unprofiled)")
        stats = pstats.Stats(str(out))
        stats.sort_stats("tottime").print_stats(25)
        stats.sort_stats("cumulative").print_stats(r"services|sqlalchemy|sqlite3|psycopg", 30)
    return 0


def calls_run(n: int, pairs: list[str], cpu: bool, baseline: Path | None,
              rounds: int) -> int:
    """``studio run`` (sandbox ``none``) of each ``PROVIDER:DB`` counting its Python calls per
    step (``cpu``: measuring its CPU per step in the process), ``rounds`` times; with a
    ``baseline`` checkout, that tree's run right before each of this tree's, and the ratios."""
    logging.getLogger("services").setLevel(logging.ERROR)
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if baseline is not None:
        trees.insert(0, ("baseline", baseline.resolve()))
    what = "CPU ms per step (studio process + its commands)" if cpu else "Python calls per step"
    print(f"{what}, {n} steps, {rounds} round(s), load average {os.getloadavg()[0]:.2f}"
          + (f"; baseline {baseline}" if baseline else ""), flush=True)
    found: dict[tuple[str, str], list[list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-pp-calls-") as tmp:
        root = Path(tmp)
        (root / "workspace").mkdir()
        for index in range(rounds):
            for pair in pairs:
                provider, db = pair.split(":")
                for label, source in trees:
                    counted = root / f"calls-{index}.txt"
                    studio_run(n, provider, db, "none", root, root / "workspace", calls=counted,
                               calls_cpu=cpu, source=source)
                    values = [float(v) for v in counted.read_text().split()]
                    found.setdefault((pair, label), []).append(values)
                    shown = " + ".join(f"{v:.2f}" if cpu else f"{v:.0f}" for v in values)
                    print(f"  round {index + 1} {pair:18} {label:10} {shown}", flush=True)
    print(f"\n{'provider:db':18} {'tree':10} {'median':>10}"
          + ("  (own + commands)" if cpu else ""))
    for pair in pairs:
        medians = {label: [statistics.median(v[i] for v in found[(pair, label)])
                           for i in range(len(found[(pair, label)][0]))] for label, _ in trees}
        for label, _ in trees:
            shown = " + ".join(f"{v:.2f}" if cpu else f"{v:.0f}" for v in medians[label])
            print(f"{pair:18} {label:10} {shown:>10}")
        if baseline is not None:
            ratio = medians["this tree"][0] / medians["baseline"][0]
            print(f"{pair:18} {'ratio':10} {ratio:10.3f}  ({(ratio - 1) * 100:+.1f} %"
                  f"{' of the studio process' if cpu else ''})")
    print(f"load average at the end {os.getloadavg()[0]:.2f}"
          + ("" if cpu else " (the count does not depend on it)"))
    return 0


FEW_STEPS = 5


def instructions_run(n: int, pairs: list[str], baseline: Path | None) -> int:
    """Each ``PROVIDER:DB`` run (sandbox ``none``) under valgrind's cachegrind at
    :data:`FEW_STEPS` steps and at ``n``: the instructions of the ``studio`` process per step
    are the difference over the extra steps (start-up and exit cancel out). Independent of the
    load; slow (minutes a run)."""
    logging.getLogger("services").setLevel(logging.ERROR)
    trees: list[tuple[str, Path | None]] = [("this tree", None)]
    if baseline is not None:
        trees.insert(0, ("baseline", baseline.resolve()))
    print(f"instructions per step (cachegrind, {n} steps minus {FEW_STEPS})", flush=True)
    found: dict[tuple[str, str], float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-pp-instr-") as tmp:
        root = Path(tmp)
        (root / "workspace").mkdir()
        for pair in pairs:
            provider, db = pair.split(":")
            for label, source in trees:
                total: dict[int, int] = {}
                for steps in (FEW_STEPS, n):
                    out = root / f"cachegrind-{steps}.out"
                    studio_run(steps, provider, db, "none", root, root / "workspace",
                               source=source, wrapper=[
                                   "valgrind", "--tool=cachegrind", "--cache-sim=no",
                                   f"--cachegrind-out-file={out}"])
                    total[steps] = next(int(line.split()[1]) for line in
                                        out.read_text().splitlines()
                                        if line.startswith("summary:"))
                found[(pair, label)] = (total[n] - total[FEW_STEPS]) / (n - FEW_STEPS)
                print(f"  {pair:18} {label:10} {found[(pair, label)] / 1e6:8.2f} M", flush=True)
            if baseline is not None:
                ratio = found[(pair, "this tree")] / found[(pair, "baseline")]
                print(f"  {pair:18} {'ratio':10} {ratio:8.3f}  ({(ratio - 1) * 100:+.1f} %)",
                      flush=True)
    return 0


def round_trips_run(n: int, provider: str) -> int:
    """One ``studio run`` on PostgreSQL through :class:`bench.pg_wire.CountingProxy`: the round
    trips between its first and its last model request, per step, by what they carried."""
    from collections import Counter

    from bench.pg_wire import CountingProxy, classify

    def via(port: int) -> Callable[[str], str]:
        def rewrite(url: str) -> str:
            return (url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{port}/")
                    + "?sslmode=disable&gssencmode=disable")
        return rewrite

    logging.getLogger("services").setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="bench-pp-rt-") as tmp, CountingProxy() as proxy:
        root = Path(tmp)
        (root / "workspace").mkdir()
        times: list[float] = []
        m = studio_run(n, provider, "postgresql", "none", root, root / "workspace",
                       via=via(proxy.port), served_times=times)
        trips = proxy.between(times[0], times[-1])
    kinds = Counter(" + ".join(dict.fromkeys(classify(s) for s in t.statements)) or "(none)"
                    for t in trips)
    statements = sum(len(t.statements) for t in trips)
    print(f"studio run {provider} postgresql none, {n} steps (median {m.median_ms:.2f} ms/step "
          f"through the proxy): {len(trips) / n:.2f} round trips and {statements / n:.2f} "
          f"statements per step, {proxy.connections} connections in all")
    for kind, count in kinds.most_common():
        print(f"  {count / n:6.2f} per step  {kind}")
    with CountingProxy() as proxy:  # the durable floor's commit, through the same proxy
        admin = pg_admin().replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/")
        with psycopg.connect(admin + "?sslmode=disable&gssencmode=disable") as conn:
            conn.execute("CREATE TEMPORARY TABLE bench_steps (n integer, body text)")
            conn.commit()
            start = time.perf_counter()
            for i in range(n):
                conn.execute("INSERT INTO bench_steps VALUES (%s, %s)", (i, "{}"))
                conn.commit()
            floor_trips = proxy.between(start, time.perf_counter())
    print(f"durable floor: {len(floor_trips) / n:.2f} round trips per step "
          f"({', '.join(dict.fromkeys(classify(s) for t in floor_trips for s in t.statements))})")
    return 0


def report(rows: list[Measure], load: tuple[float, float, float]) -> None:
    def find(label: str, db: str = "-", sandbox: str = "none") -> Measure | None:
        return next((r for r in rows if (r.label, r.db, r.sandbox) == (label, db, sandbox)), None)

    print(f"\n{'loop':24} {'db':10} {'sandbox':7} {'median ms':>9} {'mean ms':>8} "
          f"{'vs durable':>10} {'cpu ms':>7} {'first req s':>11} {'RSS MiB':>8}")
    for r in rows:
        durable = find("durable floor", r.db) if r.db != "-" else None
        ratio = f"{r.median_ms / durable.median_ms:9.2f}x" if durable and durable is not r else ""
        rss = f"{max(r.rss_mib):8.0f}" if r.rss_mib else ""
        first = f"{r.first_request_s:11.2f}" if r.first_request_s else ""
        print(f"{r.label:24} {r.db:10} {r.sandbox:7} {r.median_ms:9.2f} {r.mean_ms:8.2f} "
              f"{ratio:>10} {r.cpu_ms:7.2f} {first:>11} {rss:>8}")
    msa = find("mini-swe-agent")
    print("\ntargets:")
    for r in rows:
        if not r.label.startswith("studio run") or r.label.endswith("claude"):
            continue
        if r.sandbox == "none":
            durable = find("durable floor", r.db)
            if durable:
                for times, issue in ((2, "issue 12"), (3, "issue 35")):
                    ok = r.median_ms <= times * durable.median_ms
                    print(f"  {r.label} {r.db}: {r.median_ms:.2f} <= {times} x "
                          f"{durable.median_ms:.2f} (durable floor, {issue}): "
                          f"{'met' if ok else 'MISSED'}")
            if msa:
                ok = r.median_ms < msa.median_ms
                print(f"  {r.label} {r.db}: {r.median_ms:.2f} < {msa.median_ms:.2f} "
                      f"(mini-swe-agent): {'met' if ok else 'MISSED'}")
        else:
            plain = find(r.label, r.db, "none")
            if plain:
                extra = r.median_ms - plain.median_ms
                print(f"  {r.label} {r.db}: sandbox {r.sandbox} adds {extra:.2f} ms/step "
                      f"(target <= 2): {'met' if extra <= 2 else 'MISSED'}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"(at the start {load[0]:.2f})")


if __name__ == "__main__":
    sys.exit(main())
