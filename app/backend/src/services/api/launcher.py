"""Handing executions created through the API to whoever runs them.

Every execution takes the durable path (:mod:`services.runs.durable`): the API records it with
:func:`services.runs.request.create_execution` and hands its id to the injected
:class:`~services.api.dispatch.WorkDispatch` (the worker's dispatcher, in ``studio api``). With a
broker that sends the Celery task and returns at once. With no broker configured the API process
runs the execution itself, in the background: a bounded pool of threads, each waiting on a
``studio execute`` child (more executions wait their turn, ``queued``). Afterwards
:func:`services.runs.endings.run_to_its_end` ends an execution whose child died before the loop
could write ``finished`` (a clone that failed, say), so live streams always end (one the kill
switch paused is left queued: it resumes once the switch is released). This module only
dispatches: how a run ends is the business of :mod:`services.runs.endings`.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from services.api.dispatch import WorkDispatch
from services.db.session import Database
from services.runs.endings import run_to_its_end

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 2


class Launcher(Protocol):
    def launch(self, execution_id: str) -> None: ...

    def shutdown(self) -> None: ...


class DispatchLauncher:
    """Dispatches to the broker when there is one, else runs in ``concurrency`` threads."""

    def __init__(self, db: Database, dispatch: WorkDispatch,
                 concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self._db = db
        self._dispatch = dispatch
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix="studio-run")
        # called when a run here ends (the API's approval clock looks again: the execution may
        # wait for an approval now, services.api.approval_clock)
        self.after_run: Callable[[], None] | None = None

    def launch(self, execution_id: str) -> None:
        if self._dispatch.brokered:
            self._dispatch.execution(execution_id)
            return
        # the caller's context (its trace span) goes with the run: its child is traced under it
        context = contextvars.copy_context()
        future = self._pool.submit(context.run, run_here, self._db, self._dispatch.execution,
                                   execution_id)
        future.add_done_callback(_log_failure)
        future.add_done_callback(lambda _done: self.after_run() if self.after_run else None)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("background execution failed", exc_info=exc)


def run_here(db: Database, run: Callable[[str], object], execution_id: str) -> None:
    """Run the execution in this process (its ``studio execute`` child); it always ends,
    unless it waits for an approval (or was decided and queued again meanwhile: a later run
    carries it on): :func:`services.runs.endings.run_to_its_end`."""
    run_to_its_end(db, run, execution_id)
