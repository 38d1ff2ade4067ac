"""The reaper loop of ``studio worker``: one pass re-dispatches expired leases only, and the
interval comes from the runtime setting, read after each pass."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from datetime import timedelta

from sqlalchemy import update

from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.leases import LeaseStore
from services.db.models import NodeExecution
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.settings import StudioSettings
from services.worker.reaper_loop import ReaperLoop
from tests.support.redaction import settings_redactor


def _claimed(db: Database, *, expired: bool) -> str:
    execution_id = ExecutionRepository(db, settings_redactor()).create(provider="replay",
                                                                       model="replay", prompt="p")
    LeaseStore(db).claim(execution_id, "host:1:abc", ttl_s=300)
    if expired:
        with db.session() as session:
            session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                            .values(lease_expires_at=utcnow() - timedelta(seconds=5)))
    return execution_id


def test_a_pass_dispatches_expired_leases_and_answers_the_interval(
        worker_settings: StudioSettings, worker_db: Database) -> None:
    expired = _claimed(worker_db, expired=True)
    _claimed(worker_db, expired=False)
    SettingsRepository(worker_db).set("reaper_interval_s", 2.5)
    sent: list[str] = []
    loop = ReaperLoop(worker_settings, sent.append)
    assert loop.run_pass(worker_db) == 2.5
    assert sent == [expired]
    SettingsRepository(worker_db).set("reaper_interval_s", 0.5)
    assert loop.run_pass(worker_db) == 0.5  # read fresh
    assert loop.passes == 2


def test_the_thread_runs_passes_until_stopped(worker_settings: StudioSettings,
                                              worker_db: Database) -> None:
    expired = _claimed(worker_db, expired=True)
    SettingsRepository(worker_db).set("reaper_interval_s", 0.1)
    SettingsRepository(worker_db).set("queued_timeout_s", 0.3)  # the bound between two sends
    sent: list[str] = []
    loop = ReaperLoop(worker_settings, sent.append)
    loop.start()
    try:
        for _ in range(600):
            if len(sent) >= 2:
                break
            loop.join(0.05)
    finally:
        loop.stop()
        loop.join(30)
    assert not loop.is_alive()
    assert sent[:2] == [expired, expired]  # sent again, once per bound, until claimed


def _database_fds(path: str) -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{fd}").startswith(path):
                found.append(fd)
    return found


def test_no_database_connection_is_open_across_a_fork(worker_settings: StudioSettings,
                                                      worker_db: Database) -> None:
    """The worker's main process forks its pool with the reaper thread running: a pool process
    that inherits an open SQLite connection (worse, one in a transaction) may find the database
    busy for good. Each child forked here, while passes run every 0.05 s, has no descriptor of
    the database open and writes to it at once."""
    SettingsRepository(worker_db).set("reaper_interval_s", 0.05)
    worker_db.dispose()
    path = str(worker_settings.database_url.get_secret_value()).removeprefix(  # type: ignore[union-attr]
        "sqlite:///")
    loop = ReaperLoop(worker_settings, lambda _: None)
    loop.start()
    try:
        while loop.passes < 2:
            loop.join(0.05)
        for _ in range(10):
            pid = os.fork()
            if pid == 0:  # the child: report through the exit code only
                code = 3 if _database_fds(path) else 0
                if code == 0:
                    engine = sqlite3.connect(path, timeout=5)
                    try:
                        engine.execute("BEGIN IMMEDIATE")
                        engine.execute("ROLLBACK")
                    except sqlite3.Error:
                        code = 4
                os._exit(code)
            _, status = os.waitpid(pid, 0)
            assert os.waitstatus_to_exitcode(status) == 0
            loop.join(0.03)
    finally:
        loop.stop()
        loop.join(30)
    assert not loop.is_alive() and loop.passes >= 2
