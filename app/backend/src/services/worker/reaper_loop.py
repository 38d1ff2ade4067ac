"""The reaper inside ``studio worker``: a thread that re-dispatches executions whose lease expired.

Every ``reaper_interval_s`` (a runtime setting, read again after each pass) it runs one pass of
the durable path's reaper with a dispatch callable that sends ``studio.execute_node``. Nothing
waits for the broker's visibility timeout: an execution whose worker died is sent again as soon
as its lease has expired and a reaper has looked. Every worker may run a reaper; two reapers
finding the same execution send it twice, and the second delivery finds a live lease and is
ignored (see :mod:`~services.worker.admission`).

The pass runs in the worker's main process, not as a task: with ``prefetch_multiplier = 1`` and
every pool slot busy with a long execution, a ``studio.reap`` message would wait behind them.

That main process forks the prefork pool's processes (at start, and whenever one is replaced).
SQLite must not be open across a fork: a pool process forked while the reaper held a
transaction inherits SQLite's lock bookkeeping and finds the database busy for good (every task
it took failed with ``database is locked``). So the loop never has a connection open when the
process forks: a fork waits for the pass under way to end, then the loop's connections are
closed (the next pass opens new ones).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from kombu.exceptions import KombuError

from services.db.session import Database, DatabaseError, open_database
from services.execution.errors import ExecutionError
from services.settings import StudioSettings
from services.worker.handlers import reap_once, reaper_interval_s

log = logging.getLogger(__name__)

FALLBACK_INTERVAL_S = 30.0
MIN_INTERVAL_S = 0.1
# What one failed pass may raise without ending the loop: the database or the broker being away
# for a moment. The error is logged with its traceback and the next pass tries again.
TRANSIENT_ERRORS = (DatabaseError, KombuError, OSError, ExecutionError)


class ReaperLoop(threading.Thread):
    """Runs reaper passes until :meth:`stop`."""

    def __init__(self, settings: StudioSettings, dispatch: Callable[[str], Any],
                 dispatch_node: Callable[[str, str], Any] | None = None) -> None:
        super().__init__(name="studio-reaper", daemon=True)
        self._settings = settings
        self._dispatch = dispatch
        self._dispatch_node = dispatch_node  # paused flowchart nodes, once the switch is off
        self._stopping = threading.Event()
        self.passes = 0
        # held during a pass and across a fork of this process (reentrant: a pass may fork)
        self._no_fork = threading.RLock()
        self._db: Database | None = None
        os.register_at_fork(before=self._before_fork, after_in_parent=self._no_fork.release,
                            after_in_child=self._no_fork.release)

    def _before_fork(self) -> None:
        self._no_fork.acquire()
        if self._db is not None:
            self._db.dispose()  # no SQLite connection open across the fork

    def stop(self) -> None:
        self._stopping.set()

    def run(self) -> None:
        with self._no_fork:
            db = self._db = open_database(self._settings)
            db.dispose()
        try:
            while not self._stopping.is_set():
                with self._no_fork:
                    interval = self.run_pass(db)
                self._stopping.wait(interval)
        finally:
            with self._no_fork:
                self._db = None
                db.dispose()

    def run_pass(self, db: Database) -> float:
        """One pass; answers the interval to wait before the next."""
        try:
            reaped = reap_once(db, self._settings, self._dispatch, self._dispatch_node)
            if reaped:
                log.info("reaper: re-dispatched %s", ", ".join(reaped))
            return max(reaper_interval_s(db), MIN_INTERVAL_S)
        except TRANSIENT_ERRORS:
            log.exception("reaper: pass failed; trying again later")
            return FALLBACK_INTERVAL_S
        finally:
            self.passes += 1
