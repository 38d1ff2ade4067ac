"""The world of the chaos tests: PostgreSQL (a fresh migrated database), the Redis broker, the
token-guarded git host and the GitHub API double, and ``studio worker`` processes that are killed
and replaced while executions run."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, open_database
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
from tests.integration.repo_env import TOKEN, RepoWorld, repo_world
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

    def env(self) -> dict[str, str]:
        return self.world.env(self.root / "workspaces", STUDIO_BROKER_URL=self.broker.url,
                              STUDIO_WORKER_QUEUE=self.broker.queue,
                              STUDIO_GIT_AUTHOR_NAME="Chaos Agent",
                              STUDIO_GIT_AUTHOR_EMAIL="chaos@studio.invalid")

    def settings(self) -> StudioSettings:
        return studio_settings(self.world.root / "data", database_url=self.world.db_url,
                               broker_url=self.broker.url, worker_queue=self.broker.queue,
                               github_token=TOKEN, github_api_url=self.world.api.api_url,
                               github_git_origins=[self.world.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"])

    def database(self) -> Database:
        return open_database(self.settings())

    def set(self, **values: str) -> None:
        for key, value in values.items():
            done = subprocess.run([*STUDIO, "settings", "set", key, value], env=self.env(),
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
    repo = ExecutionRepository(db)
    found = {i: repo.get(i) for i in ids}
    return {i: r for i, r in found.items() if r is not None}


def executor_processes(ids: list[str]) -> list[int]:
    return [pid for i in ids for pid in processes_running("execute", i) if alive(pid)]


def events(db: Database, execution_id: str) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e.seq, e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]
