"""The API's approval clock: a pending approval expires even where no reaper runs.

The worker's reaper denies approvals past their ``expires_at`` (:func:`services.runs.approvals.
reap_approvals`); a deployment of the API alone (no broker, no worker) has none, and an execution
waiting for an approval would wait forever. :class:`ApprovalClock` is a daemon thread of the API
process that sleeps until the first pending approval's ``expires_at`` (at most
:data:`MAX_SLEEP_S`, and is woken early by :meth:`ApprovalClock.poke` when an execution this
process ran starts waiting), then denies every expired approval as timed out through the same
conditional decision a person's goes through (:func:`~services.runs.approvals.expire_approvals`)
and dispatches the execution (or its flowchart node) again, so the model gets
``permission_denied`` and carries on. Two clocks (replicas, a reaper as well) race harmlessly:
one statement decides, the other finds it decided.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

from services.db.approvals import ApprovalRepository
from services.db.base import utcnow
from services.db.session import Database
from services.runs.approvals import Dispatch, NodeDispatch, expire_approvals

log = logging.getLogger(__name__)

MAX_SLEEP_S = 30.0
MIN_SLEEP_S = 0.05


class ApprovalClock:
    def __init__(self, db: Database, dispatch: Dispatch,
                 dispatch_node: NodeDispatch | None = None) -> None:
        self._db = db
        self._dispatch = dispatch
        self._dispatch_node = dispatch_node
        self._stop = threading.Event()
        self._poked = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="studio-approval-clock",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        """Look again now (an approval may have been asked)."""
        self._poked.set()

    def stop(self) -> None:
        self._stop.set()
        self._poked.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def tick(self) -> float:
        """Expire what is due; answers how long to sleep before the next one is."""
        expire_approvals(self._db, self._dispatch, dispatch_node=self._dispatch_node)
        due = ApprovalRepository(self._db).next_expiry()
        if due is None:
            return MAX_SLEEP_S
        wait = (_aware(due) - utcnow()).total_seconds()
        return min(max(wait, MIN_SLEEP_S), MAX_SLEEP_S)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                wait = self.tick()
            except Exception:  # the database away a moment: try again later, never die
                log.exception("approval clock: expiring approvals failed")
                wait = MAX_SLEEP_S
            self._poked.wait(wait)
            self._poked.clear()


def _aware(moment: datetime) -> datetime:
    """SQLite answers naive datetimes, PostgreSQL aware ones (UTC either way)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
