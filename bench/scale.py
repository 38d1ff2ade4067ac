"""How far one worker scales: N concurrent executions over one ``studio worker --concurrency N``.

For each N of ``--ns`` (default 1,8,16,32) a fresh ``studio worker --concurrency N`` (Redis
broker, a fresh PostgreSQL database) takes N executions created over the API (``POST
/api/executions`` to a real ``studio api``, which dispatches them): ``provider=codex`` against the
scripted model server of ``tests/support/model_server.py``, which answers every request after
``--latency`` seconds (default 1 s), ``--steps`` command steps each (default 8, each runs
``true``), then the final answer; no pull request. The product path throughout: clone through the
mirror cache, the sandbox (``STUDIO_SANDBOX`` as configured, ``auto`` by default), the journal.

Reported per N: the wall time from the first ``POST`` to the last execution finished, executions
per minute and the ratio to N = 1, the machine's busy CPU time per execution over that window
(``/proc/stat``: the worker and its executions, the API, PostgreSQL, the model server, git, this
script together), and the peak PSS of the worker's process tree (the worker, its pool or fork
server, every ``studio execute`` and what it started; ``/proc/<pid>/smaps_rollup``) divided by N.

    python bench/scale.py                           # N = 1,8,16,32 (about 3 min)
    python bench/scale.py --ns 1,8                  # quick
    python bench/scale.py --source /tmp/base        # the worker and API of another checkout
                                                    # (a baseline: `git archive` of main)
    python bench/scale.py --prefork                 # the opt-out process model only
    python bench/scale.py --ns 1,8 --compare        # both process models, side by side
    python bench/scale.py --ns 8 --pages            # each forked child's copied pages

The worker runs ``studio worker``'s default process model (a thread pool and the fork server;
``STUDIO_WORKER_FORK_SERVER=true``, set explicitly so that an older ``--source`` runs it too)
unless ``--prefork`` (``STUDIO_WORKER_FORK_SERVER=false``: a prefork pool, each execution an
exec'ed ``studio execute``) or ``--compare``: for each N a round of each, the prefork pool first,
and the fork server's figures as ratios to the prefork pool's (the baseline) in the same run.

Before the rounds, one N = 1 round that is not reported (``--no-warm-up``: none) warms what is
done once per deployment, not per execution: the API's first ``POST`` (the modules creating an
execution imports, about 0.2 s of CPU) and the mirror cache's first fill; the fork server's
warm-up is outside every round too (each round waits for it).

Targets (issue 39): CPU per execution <= 0.8 s, PSS per concurrent execution <= 60 MB, N = 32 at
least 20x the executions per minute of N = 1, every execution succeeds. The exit status is 0
whatever the numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sqlalchemy import func, select  # noqa: E402
from tests.integration.api.server import api_process  # noqa: E402
from tests.integration.celery_fixtures import claimed_broker  # noqa: E402
from tests.support.git_http_server import git_http_server, seed_bare_repo  # noqa: E402
from tests.support.github_api import github_api  # noqa: E402
from tests.support.model_requests import RequestRecord  # noqa: E402
from tests.support.model_script import Reply, text, tool_calls  # noqa: E402
from tests.support.model_server import ScriptedModelServer  # noqa: E402
from tests.support.settings import studio_settings  # noqa: E402

from bench import fork_pages  # noqa: E402
from bench.concurrency import CpuSampler  # noqa: E402
from bench.overhead_common import API_KEY, FINAL, TOOL, step_argv  # noqa: E402
from bench.product_path import pg_database  # noqa: E402
from bench.scale_timeline import pg_counts, print_timeline  # noqa: E402
from services.db.executions import ExecutionRepository  # noqa: E402
from services.db.migrate import upgrade  # noqa: E402
from services.db.models import NodeExecution  # noqa: E402
from services.db.runtime_settings import SettingsRepository  # noqa: E402
from services.db.session import Database, create_db_engine, open_database  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "scale.json"
PREFORK, FORK_SERVER = "prefork", "fork-server"
TOKEN = "ghs_BenchScaleToken0123456789abcdefgh"
REPO = "bench/widgets"
MARKER = re.compile(rb"\[bench-scale-([0-9a-f]{12})\]")
READY = "ready."  # Celery's line once the worker consumes
WARM = re.compile(r"fork server: pid \d+ ready after ([0-9.]+) s")
SOURCE = ROOT / "app" / "backend" / "src"
TICK = os.sysconf("SC_CLK_TCK")


class Router:
    """Each request waits ``latency`` seconds, then gets its execution's next step (found by the
    marker in the prompt): ``steps`` command calls, then the final answer."""

    def __init__(self, steps: int, latency: float) -> None:
        self.steps, self.latency = steps, latency
        self.lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def __call__(self, record: RequestRecord) -> Reply:
        time.sleep(self.latency)
        found = MARKER.search(record.raw_body)
        if found is None:
            return text("no marker")
        key = found.group(1).decode()
        with self.lock:
            index = self.counts.get(key, 0)
            self.counts[key] = index + 1
        if index < self.steps:
            return tool_calls([(TOOL, {"argv": step_argv(index)})])
        return text(FINAL)


@dataclass
class Round:
    n: int
    model: str  # "fork-server" (the default) or "prefork" (STUDIO_WORKER_FORK_SERVER=false)
    wall_s: float
    per_minute: float
    cpu_s_per_execution: float  # the worker's tree, the API, the PostgreSQL backends
    servers_cpu_s_per_execution: float  # this process: the model server and the git host
    sampler_cpu_s_per_execution: float  # of which the PSS sampler (smaps_rollup of the tree)
    machine_cpu_s_per_execution: float  # /proc/stat: everything (other users' load included)
    pss_mb_per_execution: float
    peak_pss_mb: float
    failed: int
    errors: list[str]


def tree(root: int) -> list[int]:
    """``root`` and every live process below it."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(
                int(entry.name))
    found, pending = [root], [root]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cpu_ticks(pid: int, *, children: bool = True) -> int:
    """utime + stime (and, with ``children``, those of the children it waited for)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    fields = stat[stat.rindex(")") + 2:].split()
    own = int(fields[11]) + int(fields[12])
    return own + (int(fields[13]) + int(fields[14]) if children else 0)


def tree_ticks(root: int) -> int:
    """The CPU time of a process tree, its reaped descendants included (each level waits for
    its children: their time is in its ``cutime``)."""
    return sum(cpu_ticks(pid) for pid in tree(root))


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _name(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return " ".join(part.decode(errors="replace") for part in argv[:5] if part)[-60:]


def postgres_backends(database: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if argv.startswith("postgres:") and f" {database} " in argv:
                found.append(int(entry.name))
    return found


class Sampler(threading.Thread):
    """Every 0.5 s: the PSS of a process tree (its peak kept) and the CPU time of the
    PostgreSQL backends serving ``database`` (the last value seen of each); with ``pages``,
    also each forked ``studio execute``'s pages against its fork server's
    (:mod:`bench.fork_pages`, the last sample of each child kept)."""

    def __init__(self, root: int, database: str, pages: bool = False) -> None:
        super().__init__(daemon=True)
        self.root, self.database, self.peak_kib = root, database, 0
        self.backends: dict[int, int] = {}
        self.peak_processes: dict[int, tuple[int, str]] = {}
        self.pages = pages
        self.child_pages: dict[int, Counter[tuple[str, str]]] = {}
        self.cpu_s = 0.0  # this thread's own CPU time (in ``servers``): the observer's cost
        self.stop = threading.Event()

    def sample(self) -> None:
        sizes = {pid: pss_kib(pid) for pid in tree(self.root)}
        if sum(sizes.values()) > self.peak_kib:
            self.peak_kib = sum(sizes.values())
            self.peak_processes = {pid: (kib, _name(pid)) for pid, kib in sizes.items()}
        if self.pages:
            servers = [pid for pid in sizes if "services.cli.fork_server" in _name(pid)]
            for server in servers:
                for pid in sizes:
                    if _parent(pid) == server and " execute " in f" {_name(pid)} ":
                        with contextlib.suppress(OSError):
                            self.child_pages[pid] = fork_pages.classify(pid, server)
        for pid in postgres_backends(self.database):
            self.backends[pid] = max(self.backends.get(pid, 0),
                                     cpu_ticks(pid, children=False))

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.thread_time()
            self.sample()
            self.cpu_s += time.thread_time() - started
            self.stop.wait(0.5)


def unfinished(db: Database, ids: list[str]) -> int:
    """How many of ``ids`` have not finished: one query per poll, whatever N (reading every
    row each 0.2 s was 2N queries, the benchmark's own load growing with N)."""
    with db.read_session() as session:
        return int(session.scalar(
            select(func.count()).select_from(NodeExecution).where(
                NodeExecution.id.in_(ids), NodeExecution.finished_at.is_(None))) or 0)


def _pg_counts(args: argparse.Namespace, db_url: str) -> tuple[int, int] | None:
    """With ``--timeline``: the database's sessions and commits so far."""
    if not args.timeline:
        return None
    db = open_database(studio_settings(database_url=db_url))
    try:
        return pg_counts(db)
    finally:
        db.dispose()


def start_worker(env: dict[str, str], log_path: Path, n: int,
                 cwd: Path | None) -> subprocess.Popen[bytes]:
    with log_path.open("wb") as log:
        return subprocess.Popen([sys.executable, "-m", "services.cli", "worker",
                                 "--concurrency", str(n), "--no-reaper"], env=env, cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def run_round(n: int, model: str, args: argparse.Namespace, api: object, env: dict[str, str],
              db_url: str, repo_url: str, root: Path, cwd: Path | None) -> Round:
    database = db_url.rsplit("/", 1)[1]
    log_path = root / f"worker-{model}-{n}.log"
    env = {**env, "STUDIO_WORKER_FORK_SERVER": "true" if model == FORK_SERVER else "false"}
    worker = start_worker(env, log_path, n, cwd)
    try:
        deadline = time.monotonic() + 120
        while READY not in log_path.read_text(errors="replace"):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the worker did not start:\n" + log_path.read_text()[-3000:])
            time.sleep(0.2)
        if model == FORK_SERVER:
            # its slots exec their children until the fork server is warm: the rounds
            # measure the warm worker (the warm-up, once per worker, is printed apart; an
            # older checkout's first fork waited for it instead)
            while not WARM.search(log_path.read_text(errors="replace")):
                if worker.poll() is not None or time.monotonic() > deadline + 120:
                    raise RuntimeError("the fork server did not start:\n"
                                       + log_path.read_text()[-3000:])
                time.sleep(0.2)
            warm = WARM.search(log_path.read_text(errors="replace"))
            print(f"  N={n}: fork server ready after {warm.group(1) if warm else '?'} s",
                  flush=True)
        time.sleep(1.0)  # the pool settles
        sampler = Sampler(worker.pid, database, pages=args.pages)
        sampler.sample()
        before = dict(sampler.backends)
        cpu = CpuSampler()
        cpu.start()
        sampler.start()
        counts = _pg_counts(args, db_url)
        own = os.times()
        product = tree_ticks(worker.pid) + cpu_ticks(api.process.pid)  # type: ignore[attr-defined]
        started = time.perf_counter()
        started_wall = time.time()
        ids = []
        with api.client(api.admin) as client:  # type: ignore[attr-defined]
            for _ in range(n):
                body = {"repo_url": repo_url, "provider": "codex", "pull_request": False,
                        "prompt": f"[bench-scale-{uuid.uuid4().hex[:12]}] Run `true` until "
                                  "told to stop.",
                        "limits": {"max_iterations": args.steps + 10}}
                answer = client.post("/api/executions", json=body)
                if answer.status_code != 202:
                    raise RuntimeError(f"POST /api/executions: {answer.status_code} "
                                       f"{answer.text[:300]}")
                ids.append(answer.json()["id"])
        db = open_database(studio_settings(database_url=db_url))
        repo = ExecutionRepository(db)
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            if unfinished(db, ids) == 0:
                break
            time.sleep(0.2)
        ended = time.perf_counter()
        rows = [repo.get(i) for i in ids]
        print_timeline(db, ids, started_wall, log_path, counts)  # with --timeline only
        wall = ended - started
        product = tree_ticks(worker.pid) + cpu_ticks(api.process.pid) - product  # type: ignore[attr-defined]
        servers = sum(os.times()[:4]) - sum(own[:4])
        cpu.stop.set()
        sampler.stop.set()
        cpu.join(5)
        sampler.join(5)
        backends = sum(ticks - before.get(pid, 0) for pid, ticks in sampler.backends.items())
        errors = [f"{'unfinished' if r is None else r.status}: "
                  f"{getattr(r, 'error_code', '')}: {getattr(r, 'error_message', '')}"
                  for r in rows if r is None or r.status != "succeeded"]
        db.dispose()
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, 9)
            worker.wait()
    if errors:
        kept = Path(tempfile.gettempdir()) / f"scale-worker-{n}.log"
        kept.write_bytes(log_path.read_bytes())
        print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
        print(f"the worker's log: {kept}", file=sys.stderr)
    if args.breakdown:
        for kib, name in sorted(sampler.peak_processes.values(), reverse=True):
            print(f"    {kib / 1024:7.1f} MB  {name}")
    if args.pages:
        fork_pages.report(list(sampler.child_pages.values()))
    return Round(n=n, model=model, wall_s=wall, per_minute=(n - len(errors)) / wall * 60,
                 cpu_s_per_execution=(product + backends) / TICK / n,
                 servers_cpu_s_per_execution=servers / n,
                 sampler_cpu_s_per_execution=sampler.cpu_s / n,
                 machine_cpu_s_per_execution=cpu.between(started, ended) / n,
                 pss_mb_per_execution=sampler.peak_kib / 1024 / n,
                 peak_pss_mb=sampler.peak_kib / 1024,
                 failed=len(errors), errors=errors[:5])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns", default="1,8,16,32")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--latency", type=float, default=1.0, help="seconds per model answer")
    parser.add_argument("--sandbox", default=None, help="STUDIO_SANDBOX (default: unset, auto)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per round")
    parser.add_argument("--source", type=Path, default=None,
                        help="run the worker and the API from this checkout (a baseline)")
    parser.add_argument("--profile", action="store_true",
                        help="instead: where one execution's fixed cost goes (an exec'ed "
                             "`studio execute`, the model answering at once)")
    parser.add_argument("--breakdown", action="store_true",
                        help="print each process's PSS at the peak of each round")
    parser.add_argument("--pages", action="store_true",
                        help="print each forked execution's pages: shared with its fork "
                             "server, copied, new (bench/fork_pages.py; root)")
    parser.add_argument("--fork-server", action="store_true",
                        help="run the fork server (the default; STUDIO_WORKER_FORK_SERVER)")
    parser.add_argument("--prefork", action="store_true",
                        help="run the opt-out process model (STUDIO_WORKER_FORK_SERVER=false)")
    parser.add_argument("--compare", action="store_true",
                        help="for each N, the prefork pool then the fork server")
    parser.add_argument("--no-warm-up", action="store_true",
                        help="no unreported N = 1 round first (the API's first request then "
                             "counts in the first round)")
    parser.add_argument("--profile-out", type=Path, default=None,
                        help="with --profile: keep the cProfile file there")
    parser.add_argument("--timeline", action="store_true",
                        help="print each round's timeline per execution from the rows' and "
                             "the journal's timestamps (bench/scale_timeline.py)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    models = ([PREFORK, FORK_SERVER] if args.compare
              else [PREFORK] if args.prefork and not args.fork_server else [FORK_SERVER])
    load = os.getloadavg()
    source = args.source.resolve() / "app" / "backend" / "src" if args.source else None
    print(f"scale: N = {ns}, {' and '.join(models)}, {args.steps} steps, {args.latency} s per "
          "answer, source "
          f"{source or 'this checkout'}, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"on {os.cpu_count()} CPUs", flush=True)
    rounds: list[Round] = []
    with pg_database("bench_scale") as db_url:
        engine = create_db_engine(db_url)
        upgrade(engine)
        engine.dispose()
        ceiling = open_database(studio_settings(database_url=db_url))
        SettingsRepository(ceiling).set("max_iterations", args.steps + 10)
        ceiling.dispose()
        router = Router(args.steps, args.latency)
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp, \
                claimed_broker() as broker, \
                git_http_server(Path(tmp) / "git", TOKEN) as host, \
                github_api(Path(tmp) / "git", TOKEN) as api_double, \
                ScriptedModelServer([router] * ((sum(ns) + 1) * (args.steps + 2) * 2)) as model:
            root = Path(tmp)
            seed_bare_repo(host.root, REPO, {"README.md": "bench\n"})
            (root / "home").mkdir()
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_",
                                        "GOOGLE_", "PYTHONPATH"))}
            env.update(STUDIO_DATABASE_URL=db_url, STUDIO_BROKER_URL=broker.url,
                       STUDIO_WORKER_QUEUE=broker.queue, STUDIO_GITHUB_TOKEN=TOKEN,
                       STUDIO_GITHUB_API_URL=api_double.api_url,
                       STUDIO_GITHUB_GIT_ORIGINS=host.base_url,
                       STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1",
                       STUDIO_DATA_DIR=str(root / "data"),
                       STUDIO_WORKSPACE_DIR=str(root / "workspaces"), HOME=str(root / "home"),
                       OPENAI_BASE_URL=model.url + "/v1", OPENAI_API_KEY=API_KEY)
            if args.sandbox:
                env["STUDIO_SANDBOX"] = args.sandbox
            if source is not None:
                env["PYTHONPATH"] = str(source)
            with api_process(env, host.url(REPO)) as api:
                if args.profile:
                    router.latency = 0.0
                    profile_one(args, api, env, host.url(REPO), root, source)
                    return 0
                if not args.no_warm_up:
                    # the API's first POST imports what creating an execution needs (about
                    # 0.2 s of CPU, once per API process): outside the rounds, as the fork
                    # server's warm-up is
                    warm = run_round(1, models[0], args, api, env, db_url, host.url(REPO),
                                     root, source)
                    print(f"  warm-up round (not reported): CPU "
                          f"{warm.cpu_s_per_execution:.2f} s, failed {warm.failed}", flush=True)
                for n, kind in ((n, kind) for n in ns for kind in models):
                    rounds.append(run_round(n, kind, args, api, env, db_url, host.url(REPO),
                                            root, source))
                    r = rounds[-1]
                    print(f"  N={n} {kind}: {r.wall_s:.1f} s, {r.per_minute:.1f} executions/min, "
                          f"CPU {r.cpu_s_per_execution:.2f} s/execution (machine "
                          f"{r.machine_cpu_s_per_execution:.2f} s; the benchmark's own "
                          f"{r.servers_cpu_s_per_execution:.2f} s, its PSS sampler "
                          f"{r.sampler_cpu_s_per_execution:.2f} s), PSS "
                          f"{r.pss_mb_per_execution:.0f} MB/execution, failed {r.failed}"
                          + (f" ({r.errors[0]})" if r.errors else ""), flush=True)
    for model in models:
        report([r for r in rounds if r.model == model])
    if args.compare:
        compare(rounds)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"steps": args.steps, "latency": args.latency,
                                    "source": str(source or ""), "load": load,
                                    "rounds": [asdict(r) for r in rounds]}, indent=1))
    return 0


def _children_cpu_s(argv: list[str], env: dict[str, str], cwd: Path | None) -> float:
    """The CPU time of a command and everything it started (``RUSAGE_CHILDREN``)."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(argv, env=env, cwd=cwd, check=False, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


PHASES = (  # (label, the function whose cumulative time is the phase)
    ("database open and schema check", "services/db/session.py", "open_database"),
    ("claim, workspace: clone from the mirror", "services/repos/workspaces.py", "_clone"),
    ("mirror update (git fetch into the cache)", "services/repos/mirrors.py", "_update"),
    ("sandbox start (supervisor)", "services/execution/sandbox/session.py", "start"),
    ("finalization (commit, checks, journal)", "services/runs/finalize.py", "finalize"),
    ("the whole execution (execute_recorded)", "services/runs/service.py", "execute_recorded"),
    ("the command line (imports included)", "services/cli/main.py", "main"),
)


def profile_one(args: argparse.Namespace, api: object, env: dict[str, str], repo_url: str,
                root: Path, cwd: Path | None) -> None:
    import pstats

    def create() -> str:
        with api.client(api.admin) as client:  # type: ignore[attr-defined]
            body = {"repo_url": repo_url, "provider": "codex", "pull_request": False,
                    "prompt": f"[bench-scale-{uuid.uuid4().hex[:12]}] Run `true`.",
                    "limits": {"max_iterations": args.steps + 10}}
            return str(client.post("/api/executions", json=body).json()["id"])

    python = [sys.executable]
    create()  # a first execution fills the mirror cache, as on a worker that ran one before
    _children_cpu_s([*python, "-m", "services.cli", "execute", create()], env, cwd)
    bare = _children_cpu_s([*python, "-c", "pass"], env, cwd)
    warm = _children_cpu_s([*python, "-c", "from services.cli.fork_server import warm_up; "
                            "warm_up()"], env, cwd)
    whole = _children_cpu_s([*python, "-m", "services.cli", "execute", create()], env, cwd)
    out = root / "execute.prof"
    # profiled by CPU time (time.process_time), not wall time: the machine is shared
    profiled = ("import cProfile, runpy, sys, time\n"
                "profile = cProfile.Profile(time.process_time)\n"
                "sys.argv = ['studio', 'execute', sys.argv[2]]\n"
                "profile.enable()\n"
                "try:\n"
                "    runpy.run_module('services.cli', run_name='__main__')\n"
                "except SystemExit:\n"
                "    pass\n"
                "profile.disable()\n"
                "profile.dump_stats(OUT)\n").replace(
                    "OUT", repr(str(out)))
    _children_cpu_s([*python, "-c", profiled, str(out), create()], env, cwd)
    # as a forked child runs it: after the fork server's warm-up, in the same process (the
    # profile then holds no import the fork server has made; RUSAGE_SELF around it alone)
    warm_out = root / "execute-warm.prof"
    warm_profiled = ("import cProfile, gc, resource, sys, time\n"
                     "from services.cli import fork_server\n"
                     "fork_server.warm_up(); fork_server.load(fork_server.adapters('codex'))\n"
                     "freeze = getattr(fork_server, 'freeze_heap', None)\n"
                     "freeze() if freeze else (gc.collect(), gc.freeze())\n"
                     "import collections, re\n"
                     "from sqlalchemy import event\n"
                     "from sqlalchemy.engine import Engine\n"
                     "said = collections.Counter()\n"
                     "def count(conn, cursor, statement, *rest):\n"
                     "    said[re.sub(r'\\s+', ' ', statement)[:90]] += 1\n"
                     "event.listen(Engine, 'before_cursor_execute', count)\n"
                     "profile = cProfile.Profile(time.process_time)\n"
                     "own = resource.getrusage(resource.RUSAGE_SELF)\n"
                     "kids = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
                     "profile.enable()\n"
                     "fork_server._run_execute(sys.argv[2])\n"
                     "profile.disable()\n"
                     "own2 = resource.getrusage(resource.RUSAGE_SELF)\n"
                     "kids2 = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
                     "print('warm execute: own CPU %.3f s, its processes %.3f s' % ("
                     "own2.ru_utime + own2.ru_stime - own.ru_utime - own.ru_stime, "
                     "kids2.ru_utime + kids2.ru_stime - kids.ru_utime - kids.ru_stime), "
                     "file=sys.stderr)\n"
                     "profile.dump_stats(sys.argv[1])\n"
                     "print('warm execute: %d statements' % sum(said.values()), file=sys.stderr)\n"
                     "for text, n in said.most_common(25):\n"
                     "    print('warm execute: %4d  %s' % (n, text), file=sys.stderr)\n")
    warm_run = subprocess.run([*python, "-c", warm_profiled, str(warm_out), create()], env=env,
                              cwd=cwd, check=False, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=600)
    print("\n".join(line for line in warm_run.stderr.decode(errors="replace").splitlines()
                    if line.startswith("warm execute")))
    if args.profile_out is not None and warm_out.exists():
        import shutil

        shutil.copyfile(warm_out, args.profile_out.with_suffix(".warm.prof"))
    stats = pstats.Stats(str(out))
    cumulative = {}
    for (path, _, function), (_, _, _, cum, _) in stats.stats.items():  # type: ignore[attr-defined]
        for label, suffix, name in PHASES:
            if function == name and path.endswith(suffix):
                cumulative[label] = cumulative.get(label, 0.0) + cum
    print(f"one execution, {args.steps} steps, the model answering at once (CPU of the process "
          "tree, RUSAGE_CHILDREN):")
    print(f"  interpreter start (python -c pass)           {bare * 1000:7.0f} ms")
    print(f"  imports of the fork server's list            {(warm - bare) * 1000:7.0f} ms")
    print(f"  the whole `studio execute` (git, sandbox...) {whole * 1000:7.0f} ms")
    print("where its Python process's CPU time goes (cProfile on time.process_time; git and "
          "the sandbox's processes are in the total above, not here):")
    for label, _, _ in PHASES:
        print(f"  {label:<44} {cumulative.get(label, float('nan')) * 1000:7.0f} ms")
    if args.profile_out is not None:
        import shutil

        shutil.copyfile(out, args.profile_out)
        print(f"  the profile: {args.profile_out}")


def compare(rounds: list[Round]) -> None:
    """Each N's fork-server round against the prefork pool's of the same N (the baseline)."""
    print("\nfork server / prefork, same N, same run (below 1: the fork server needs less):")
    print(f"{'N':>3} {'exec/min':>9} {'CPU/exec':>9} {'machine CPU/exec':>17} {'PSS/exec':>9}")
    for base in (r for r in rounds if r.model == PREFORK):
        other = next((r for r in rounds if r.model == FORK_SERVER and r.n == base.n), None)
        if other is None or not base.per_minute:
            continue
        print(f"{base.n:3d} {other.per_minute / base.per_minute:8.2f}x "
              f"{other.cpu_s_per_execution / base.cpu_s_per_execution:8.2f}x "
              f"{other.machine_cpu_s_per_execution / base.machine_cpu_s_per_execution:16.2f}x "
              f"{other.pss_mb_per_execution / base.pss_mb_per_execution:8.2f}x")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def report(rounds: list[Round]) -> None:
    if not rounds:
        return
    base = next((r for r in rounds if r.n == 1), None)
    print(f"\n{rounds[0].model}:")
    print(f"{'N':>3} {'wall s':>7} {'exec/min':>9} {'vs N=1':>7} {'CPU s/exec':>11} "
          f"{'servers s':>10} {'machine s':>10} {'PSS MB/exec':>12} {'failed':>7}")
    for r in rounds:
        ratio = f"{r.per_minute / base.per_minute:.1f}x" if base and base.per_minute else "-"
        print(f"{r.n:3d} {r.wall_s:7.1f} {r.per_minute:9.1f} {ratio:>7} "
              f"{r.cpu_s_per_execution:11.2f} {r.servers_cpu_s_per_execution:10.2f} "
              f"{r.machine_cpu_s_per_execution:10.2f} {r.pss_mb_per_execution:12.0f} "
              f"{r.failed:7d}")
    print("targets:")
    worst_cpu = max((r.cpu_s_per_execution for r in rounds), default=float("nan"))
    worst_pss = max((r.pss_mb_per_execution for r in rounds if r.n > 1), default=float("nan"))
    print(f"  CPU per execution (worst N) {worst_cpu:.2f} s (target <= 0.8): "
          f"{'met' if worst_cpu <= 0.8 else 'MISSED'}")
    print(f"  PSS per concurrent execution (N > 1, worst) {worst_pss:.0f} MB (target <= 60): "
          f"{'met' if worst_pss <= 60 else 'MISSED'}")
    top = next((r for r in rounds if r.n == 32), None)
    if base and top and base.per_minute:
        ratio = top.per_minute / base.per_minute
        print(f"  N=32 {ratio:.1f}x the executions/min of N=1 (target >= 20): "
              f"{'met' if ratio >= 20 else 'MISSED'}")
    failed = sum(r.failed for r in rounds)
    print(f"  failed executions: {failed} (target 0): {'met' if failed == 0 else 'MISSED'}")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    sys.exit(main())
