"""The one database a worker task opens (:func:`services.worker.handlers.handle_execute_node`),
lent to what the task calls: the admission, the GitHub token rule, the secrets handed to a pod
and the supervision of a Job each took their own engine (and schema check) before. With the
fork server (``STUDIO_WORKER_FORK_SERVER``, the default) the tasks of ``studio worker``
(threads) share the worker's one database instead (:func:`use_worker_database`): no engine,
schema check or idle connection per slot. A prefork worker (the setting off) never sets it: no
engine is open across its pool's forks."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from services.db.session import Database, open_database
from services.settings import StudioSettings

_worker_database: Database | None = None


def use_worker_database(db: Database | None) -> None:
    """The database every task of this worker borrows (``studio worker`` with a thread pool
    opens it once: one engine, one schema check, one connection pool for all of its slots);
    None (the default): each task opens its own."""
    global _worker_database
    _worker_database = db


def worker_database() -> Database | None:
    return _worker_database


@contextmanager
def task_database(settings: StudioSettings, db: Database | None = None) -> Iterator[Database]:
    """``db`` when the task opened it already, else one opened here and disposed afterwards
    (a caller outside a task: a command, a test)."""
    if db is not None:
        yield db
        return
    opened = open_database(settings)
    try:
        yield opened
    finally:
        opened.dispose()
