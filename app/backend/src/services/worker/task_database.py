"""The one database a worker task opens (:func:`services.worker.handlers.handle_execute_node`),
lent to what the task calls: the admission, the GitHub token rule, the secrets handed to a pod
and the supervision of a Job each took their own engine (and schema check) before."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from services.db.session import Database, open_database
from services.settings import StudioSettings


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
