"""The world of the chaos tests: PostgreSQL (a fresh migrated database), the Redis broker, the
token-guarded git host and the GitHub API double, and ``studio worker`` processes that are killed
and replaced while executions run."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import signal
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from sqlalchemy import text

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, create_db_engine, open_database
from services.settings import StudioSettings
from tests.conftest import IN_CI
from tests.integration.celery_fixtures import (
    STUDIO,
    Broker,
    WorkerProcess,
    alive,
    ancestors,
    processes_running,
    start_worker,
)
from tests.integration.databases import (
    admin_conninfo,
    create_migrated_pg_database,
    drop_pg_database,
)
from tests.integration.repo_env import DONE, TEST_ARGV, TOKEN, RepoWorld, repo_world
from tests.support import warm_cli
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

FINAL = ("succeeded", "failed", "cancelled", "stalled")


@contextmanager
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database migrated to head, dropped afterwards."""
    admin = admin_conninfo()
    if admin is None:
        message = "PostgreSQL is not reachable at 127.0.0.1:5432"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    url = create_migrated_pg_database(admin)
    try:
        yield url
    finally:
        drop_pg_database(admin, url)


@dataclass
class Chaos:
    """Workers on one machine sharing the database, the broker and the hosts."""

    world: RepoWorld
    broker: Broker
    root: Path
    workers: list[WorkerProcess] = field(default_factory=list)
    started: int = 0
    provider_key: str = ""  # set: the workers' ANTHROPIC_API_KEY (a secret that must not leak)

    def env(self) -> dict[str, str]:
        extra = {"ANTHROPIC_API_KEY": self.provider_key} if self.provider_key else {}
        if os.environ.get("STUDIO_CHAOS_PREFORK", "").lower() in ("1", "true", "yes"):
            # the workers' opt-out process model (prefork pool, exec'ed children; issue 39),
            # for scripts/chaos_repeat.sh runs; the default is the fork server
            extra["STUDIO_WORKER_FORK_SERVER"] = "false"
        return self.world.env(self.root / "workspaces", STUDIO_BROKER_URL=self.broker.url,
                              STUDIO_WORKER_QUEUE=self.broker.queue,
                              STUDIO_GIT_AUTHOR_NAME="Chaos Agent",
                              STUDIO_GIT_AUTHOR_EMAIL="chaos@studio.invalid", **extra)

    def settings(self) -> StudioSettings:
        return studio_settings(self.world.root / "data", database_url=self.world.db_url,
                               broker_url=self.broker.url, worker_queue=self.broker.queue,
                               github_token=TOKEN, github_api_url=self.world.api.api_url,
                               github_git_origins=[self.world.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"])

    def database(self) -> Database:
        return open_database(self.settings())

    @contextmanager
    def database_session(self) -> Iterator[Database]:
        db = self.database()
        try:
            yield db
        finally:
            db.dispose()

    def set(self, **values: str) -> None:
        for key, value in values.items():
            done = warm_cli.run([*STUDIO, "settings", "set", key, value], env=self.env(),
                                capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr

    def start_worker(self, *args: str) -> WorkerProcess:
        self.started += 1
        worker = start_worker(self.env(), self.root / f"worker-{self.started}.log",
                              "--concurrency", "2", *args)
        self.workers.append(worker)
        return worker

    def live_workers(self) -> list[WorkerProcess]:
        return [w for w in self.workers if w.process.poll() is None]

    def kill_group(self, worker: WorkerProcess) -> None:
        """SIGKILL the worker's whole process group (main and pool processes)."""
        os.killpg(worker.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)

    def worker_of(self, execution_id: str) -> WorkerProcess | None:
        """The live worker whose pool runs ``studio execute <execution_id>``."""
        for pid in processes_running("execute", execution_id):
            chain = ancestors(pid)
            for worker in self.live_workers():
                if worker.pid in chain:
                    return worker
        return None

    def stop_all(self) -> None:
        for worker in self.workers:
            worker.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {w.log_path.name}\n{w.log()[-2500:]}" for w in self.workers)


@contextmanager
def chaos_world(root: Path, broker: Broker) -> Iterator[Chaos]:
    with postgres_url() as url, repo_world(root) as world:
        chaos = Chaos(dataclasses.replace(world, db_url=url), broker, root)
        try:
            yield chaos
        finally:
            chaos.stop_all()


def rows(db: Database, ids: list[str]) -> dict[str, NodeExecution]:
    repo = ExecutionRepository(db, settings_redactor())
    found = {i: repo.get(i) for i in ids}
    return {i: r for i, r in found.items() if r is not None}


def executor_processes(ids: list[str]) -> list[int]:
    return [pid for i in ids for pid in processes_running("execute", i) if alive(pid)]


def events(db: Database, execution_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e.seq, e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]


# --- The chaos scenario shared by tests/integration/test_chaos.py and bench/soak.py ----------
#
# Real ``studio worker`` processes on a private Redis (a ``redis-server`` of the scenario's own,
# so restarting it disturbs no one else) and a fresh PostgreSQL database; executions created
# through a real ``studio api`` process over HTTP; at random intervals (a seeded generator) one
# fault among: a worker's process group SIGKILLed (a new worker replaces it), an executor child
# (``studio execute``) SIGKILLed, a PostgreSQL backend of the workers terminated
# (``pg_terminate_backend``), the private Redis restarted (its queue lost: no persistence).
# Afterwards the invariants of :func:`check_invariants` are checked.

FAULTS = ("worker", "child", "postgres", "redis")
WORKER_APP = "studio-chaos-worker"  # application_name of the workers' PostgreSQL sessions
API_APP = "studio-chaos-api"
HARNESS_APP = "studio-chaos-harness"
PROVIDER_KEY = "sk-ant-api03-chaosPROVIDERkey0123456789abcdefXYZ"
LEDGER = "chaos-ledger.txt"
CHAOS_RUNTIME = {"lease_ttl_s": "4", "heartbeat_s": "1", "reaper_interval_s": "1",
                 "queued_timeout_s": "6", "max_attempts": "60"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@dataclass
class PrivateRedis:
    """A ``redis-server`` on a free 127.0.0.1 port, data in ``root`` (no persistence)."""

    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    restarts: int = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.root), "--save", "", "--appendonly", "no",
             "--logfile", str(self.root / "redis.log")],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)
        deadline = time.monotonic() + 60
        try:
            while True:
                try:
                    if client.ping():
                        return
                except redis.RedisError:
                    if time.monotonic() > deadline or self.process.poll() is not None:
                        raise
                time.sleep(0.1)
        finally:
            client.close()

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)

    def restart(self) -> None:
        """SIGKILL the server and start it again on the same port (everything it held lost)."""
        self.kill()
        self.start()
        self.restarts += 1


@contextmanager
def private_redis(root: Path) -> Iterator[tuple[PrivateRedis, Broker]]:
    server = PrivateRedis(root)
    server.start()
    client = redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=10)
    try:
        yield server, Broker(url=server.url, queue="studio-chaos", client=client)
    finally:
        client.close()
        server.kill()


def with_application_name(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


# Each ledger command's sleep, in whole seconds: the window the faults need. With executors
# forked from a warm process (the fork server) an execution of one-second commands could end
# before the fourth kind of fault had its turn (faults come every 2 to 5 s), leaving no
# ``studio execute`` to kill.
COMMAND_SLEEP_S = 3


def chaos_script(nonce: str, number: int, commands: int) -> tuple[dict[str, Any], list[str]]:
    """The replay script of execution ``number`` and the ledger tokens its commands append.

    Each command appends one unique token to :data:`LEDGER` and sleeps a little (a window for
    the faults); the sleep's argument carries ``nonce`` so that a leftover process is found. The
    first command also prints its environment (a secret there would reach the journal). An
    interrupted call is asked for again (``retry_interrupted``), as a model would."""
    tokens = [f"tok-{nonce}-{number}-{index}" for index in range(commands)]
    steps: list[dict[str, Any]] = [
        {"tool_calls": [{"tool": "workspace.read_file", "args": {"path": "calc.py"}}]},
        {"tool_calls": [{"tool": "workspace.edit_file",
                         "args": {"path": "calc.py", "old_text": "a - b",
                                  "new_text": "a + b"}}]}]
    for index, token in enumerate(tokens):
        shell = f"echo {token} >> {LEDGER}; sleep {COMMAND_SLEEP_S}.{nonce}"
        if index == 0:
            shell += "; env"
        steps.append({"tool_calls": [{"tool": "command.run",
                                      "args": {"argv": ["sh", "-c", shell],
                                               "timeout_s": 60}}]})
    steps.append({"tool_calls": [{"tool": "command.run",
                                  "args": {"argv": TEST_ARGV, "timeout_s": 60}}]})
    steps.append({"final": DONE})
    return {"retry_interrupted": True, "turns": steps}, tokens


@dataclass
class Invariant:
    name: str
    ok: bool
    detail: str


@dataclass
class Scenario:
    """One chaos run: the world, the API, the executions it created and the faults done."""

    chaos: Chaos
    redis_server: PrivateRedis
    api: Any  # tests.integration.api.server.ApiServer
    harness_url: str
    rng: random.Random
    seed: int
    nonce: str
    workers: int
    commands: int = 3
    ids: list[str] = field(default_factory=list)
    tokens: dict[str, list[str]] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    fault_log: list[str] = field(default_factory=list)
    created: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)
    echo: bool = False  # print each fault and each creation as it happens

    # -- executions ---------------------------------------------------------------------------

    def create(self, count: int) -> list[str]:
        """``count`` executions through ``POST /api/executions`` (a retry when the API is
        briefly unavailable, e.g. while its database session is being replaced)."""
        made = []
        with self.api.client(self.api.admin) as client:
            for _ in range(count):
                number = len(self.ids)
                script, tokens = chaos_script(self.nonce, number, self.commands)
                body = {"repo_url": self.chaos.world.url, "provider": "replay",
                        "prompt": "Fix add()", "pull_request": True, "replay_script": script}
                answer = client.post("/api/executions", json=body)
                assert answer.status_code == 202, (answer.status_code, answer.text)
                execution_id = answer.json()["id"]
                self.ids.append(execution_id)
                self.tokens[execution_id] = tokens
                self.created[execution_id] = time.monotonic()
                made.append(execution_id)
                if self.echo:
                    print(f"{time.strftime('%H:%M:%S')} created {execution_id[:8]} "
                          f"({len(self.ended)} of {len(self.ids)} ended)", flush=True)
        return made

    @contextmanager
    def database_session(self) -> Iterator[Database]:
        """The harness's own session (an application name of its own: the faults only end
        the workers' sessions)."""
        db = Database(create_db_engine(self.harness_url))
        try:
            yield db
        finally:
            db.dispose()

    def statuses(self) -> dict[str, str]:
        with self.database_session() as db:
            return {i: r.status for i, r in rows(db, self.ids).items()}

    def keep_in_flight(self, count: int) -> None:
        """Create executions so that ``count`` are unfinished."""
        ended = self.note_ended()
        if len(self.ids) - ended < count:
            self.create(count - (len(self.ids) - ended))

    def note_ended(self) -> int:
        """Record when executions were first seen final; answers how many are."""
        now = time.monotonic()
        for execution_id, status in self.statuses().items():
            if status in FINAL:
                self.ended.setdefault(execution_id, now)
        return len(self.ended)

    # -- faults -------------------------------------------------------------------------------

    def inject(self, kind: str) -> bool:
        """Do one fault of ``kind``; answers whether there was something to hit."""
        done = getattr(self, f"_fault_{kind}")()
        if done:
            self.faults[kind] += 1
        else:
            self.skipped[kind] += 1
        return bool(done)

    def _fault_worker(self) -> str | None:
        busy = [w for i in self.ids if (w := self.chaos.worker_of(i)) is not None]
        live = self.chaos.live_workers()
        if not live:
            return None
        victim = self.rng.choice(busy or live)
        self.chaos.kill_group(victim)
        self.chaos.start_worker()
        return self._log("worker", f"pid {victim.pid}")

    def _fault_child(self) -> str | None:
        children = sorted(executor_processes(self.ids))
        if not children:
            return None
        pid = self.rng.choice(children)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        return self._log("child", f"pid {pid}")

    def _fault_postgres(self) -> str | None:
        admin = admin_conninfo()
        assert admin is not None
        database = self.chaos.world.db_url.rsplit("/", 1)[1].split("?")[0]
        with psycopg.connect(admin, autocommit=True) as conn:
            found = [pid for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = %s"
                " ORDER BY pid", (database, WORKER_APP))]
            if not found:
                return None
            pid = self.rng.choice(found)
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return self._log("postgres", f"backend {pid}")

    def _fault_redis(self) -> str | None:
        self.redis_server.restart()
        return self._log("redis", f"port {self.redis_server.port}")

    def _log(self, kind: str, what: str) -> str:
        line = f"{time.strftime('%H:%M:%S')} {kind}: {what}"
        self.fault_log.append(line)
        return line

    def rage(self, until: float, gap_s: tuple[float, float], *, rounds: int | None = None,
             between: Callable[[], None] = lambda: None) -> None:
        """Faults at random intervals until ``until`` (monotonic), or ``rounds`` rounds are
        done, or (with ``rounds``) every execution has ended once every kind was done. Kinds
        come in rounds, each a seeded shuffle of all :data:`FAULTS`; a kind with nothing to hit
        is tried again at the next interval. ``between`` runs every half second meanwhile."""
        pending: list[str] = []
        done_rounds = 0
        while time.monotonic() < until:
            ended = self.note_ended()  # on every pass: an end is timed when it happens
            if rounds is not None:
                every_kind = all(self.faults[kind] for kind in FAULTS)
                if done_rounds >= rounds or (every_kind and ended == len(self.ids)):
                    return
            due = time.monotonic() + self.rng.uniform(*gap_s)  # the random interval
            while time.monotonic() < min(due, until):
                between()
                time.sleep(0.5)
            if time.monotonic() >= until:
                return
            if not pending:
                pending = self.rng.sample(FAULTS, len(FAULTS))
            if self.inject(pending[0]):
                pending.pop(0)
                done_rounds += not pending
                if self.echo:
                    print(f"{self.fault_log[-1]}", flush=True)

    def wait_final(self, bound_s: float) -> None:
        deadline = time.monotonic() + bound_s
        while self.note_ended() < len(self.ids) and time.monotonic() < deadline:
            time.sleep(0.5)

    # -- invariants ---------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop every worker (warm), then check for orphans with :meth:`orphans`."""
        self.chaos.stop_all()

    def orphans(self, grace_s: float = 30.0) -> list[str]:
        """Processes of the run still alive once ``grace_s`` has passed without them all
        gone (an executor child, or anything whose command line holds the run's nonce)."""
        deadline = time.monotonic() + grace_s
        while (found := self._leftovers()) and time.monotonic() < deadline:
            time.sleep(0.5)
        return found

    def _leftovers(self) -> list[str]:
        found = set(executor_processes(self.ids))
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                if self.nonce.encode() in (entry / "cmdline").read_bytes() and alive(
                        int(entry.name)):
                    found.add(int(entry.name))
        return [_describe(pid) for pid in sorted(found)]

    def logs_text(self) -> dict[str, str]:
        found = {w.log_path.name: w.log_path.read_text(errors="replace")
                 for w in self.chaos.workers}
        found["studio-api"] = "".join(self.api.log)
        return found

    def secrets(self) -> dict[str, str]:
        return {"GitHub token": TOKEN, "API token": self.api.admin, "provider key": PROVIDER_KEY}


def _describe(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        argv = "?"
    return f"{pid}: {argv[:160]}"


def all_rows_text(db: Database) -> dict[str, str]:
    """Every table of the database as text (one JSON document per row)."""
    with db.engine.connect() as conn:
        tables = [name for (name,) in conn.execute(text(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))]
        return {name: "\n".join(row for (row,) in conn.execute(text(
            f'SELECT row_to_json(t)::text FROM "{name}" t'))) for name in tables}


def check_invariants(scenario: Scenario, bound_s: float) -> list[Invariant]:
    """The invariants, each with a one-line detail (what broke it, or what was counted)."""
    world = scenario.chaos.world
    found: list[Invariant] = []
    with scenario.database_session() as db:
        final = rows(db, scenario.ids)
        late = [i[:8] for i in scenario.ids if i not in scenario.ended
                or scenario.ended[i] - scenario.created[i] > bound_s]
        failed = {i[:8]: f"{r.status} {r.error_code}: {(r.error_message or '')[:120]}"
                  for i, r in final.items() if r.status != "succeeded"}
        found.append(Invariant(f"every execution final within {bound_s:.0f}s",
                               not late, f"{len(scenario.ids)} executions; late: {late}"))
        found.append(Invariant("every execution succeeded", not failed,
                               f"not succeeded: {failed}" if failed else
                               f"{len(final)} succeeded"))
        pushes, pulls, ledgers, journals, calls = [], [], [], [], []
        for execution_id, row in final.items():
            short, branch = execution_id[:8], row.branch or ""
            of_final = [u for u in world.host.pushes_of(branch) if u.new == row.head_sha]
            if row.head_sha is None or len(of_final) != 1:
                pushes.append(f"{short}: {len(of_final)} pushes of {row.head_sha}")
            prs = world.pulls_of(branch)
            if len(prs) > 1 or (row.status == "succeeded" and len(prs) != 1):
                pulls.append(f"{short}: {len(prs)} PRs")
            ledger = (world.remote_file(branch, LEDGER) or "").split()
            expected = scenario.tokens[execution_id]
            complete = row.status != "succeeded" or sorted(ledger) == sorted(expected)
            if not complete or len(ledger) != len(set(ledger)) or set(ledger) - set(expected):
                ledgers.append(f"{short}: ledger {ledger}")
            journal = events(db, execution_id)
            if [seq for seq, _, _ in journal] != list(range(1, len(journal) + 1)):
                journals.append(f"{short}: seqs {[seq for seq, _, _ in journal]}")
            ids = [d["call"]["call_id"] for _, k, d in journal if k == "tool_call"]
            repeated = [c for c, n in Counter(ids).items() if n > 1]
            if repeated:
                calls.append(f"{short}: calls journalled twice {repeated}")
        found.append(Invariant("exactly one push of each final commit", not pushes,
                               "; ".join(pushes) or f"{len(world.host.pushes)} pushes in all"))
        found.append(Invariant("at most one PR per execution (one when it succeeded)", not pulls,
                               "; ".join(pulls) or f"{len(world.api.pulls)} PRs in all"))
        found.append(Invariant("journals gap-free", not journals,
                               "; ".join(journals) or "sequence numbers contiguous"))
        found.append(Invariant("no tool call executed twice", not calls and not ledgers,
                               "; ".join(calls + ledgers) or
                               "each ledger token once in the pushed result, call ids unique"))
        leaks = []
        texts = {**scenario.logs_text(), **{f"table {k}": v for k, v in all_rows_text(db).items()}}
        for where, content in texts.items():
            for name, secret in scenario.secrets().items():
                if secret in content:
                    leaks.append(f"{name} in {where}")
    orphans = scenario.orphans()
    found.append(Invariant("no orphan process after the workers stopped", not orphans,
                           "; ".join(orphans) or "none"))
    found.append(Invariant("no secret in any log or database row", not leaks,
                           "; ".join(leaks) or f"{len(texts)} logs and tables searched"))
    return found


def table(invariants: list[Invariant]) -> str:
    width = max(len(i.name) for i in invariants)
    lines = [f"{'invariant'.ljust(width)}  result  detail", f"{'-' * width}  ------  ------"]
    lines += [f"{i.name.ljust(width)}  {'ok' if i.ok else 'BROKEN':6}  {i.detail}"
              for i in invariants]
    return "\n".join(lines)


@contextmanager
def scenario(root: Path, seed: int, workers: int = 2, commands: int = 3) -> Iterator[Scenario]:
    """The world of a chaos run, its workers started, the API serving; everything stopped and
    removed afterwards."""
    from tests.integration.api.server import api_process  # the API's harness, over HTTP

    with private_redis(root / "redis") as (server, broker), chaos_world(root, broker) as chaos:
        plain_url = chaos.world.db_url
        chaos.world = dataclasses.replace(
            chaos.world, db_url=with_application_name(plain_url, WORKER_APP))
        chaos.provider_key = PROVIDER_KEY
        chaos.set(**CHAOS_RUNTIME)
        for _ in range(workers):
            chaos.start_worker()
        env = {**chaos.env(), "STUDIO_DATABASE_URL": with_application_name(plain_url, API_APP)}
        with api_process(env, chaos.world.url) as api:
            yield Scenario(chaos, server, api, with_application_name(plain_url, HARNESS_APP),
                           random.Random(seed), seed,
                           f"{random.Random(seed).randrange(10**8):08d}", workers, commands)
