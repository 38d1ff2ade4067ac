"""Handing a recorded execution to whoever runs it: what ``studio run`` and the API call.

With ``STUDIO_BROKER_URL`` set, :func:`dispatch_execution` sends ``studio.execute_node`` to the
queue ``STUDIO_WORKER_QUEUE`` and returns at once; a ``studio worker`` picks it up. Without a
broker (the embedded default) it runs the task body right here, synchronously: the same
admission check and the same ``studio execute`` child, minus the broker. Celery is not involved
at all then (no eager task objects, no in-memory transport), so the result is the same code path
a worker runs. Call it after the transaction that recorded the execution has committed.

Before a message is sent, the execution's ``dispatched_at`` is stamped: should the message be
lost (taken by a worker that dies before claiming the execution, or never sent at all), the
reaper dispatches the execution again once it has stayed queued ``queued_timeout_s`` after
that (see :func:`services.runs.reaper.reap_unclaimed`). That is also why
:func:`dispatch_or_defer` (what the API dispatches with) treats a broker it cannot reach as a
delay, not a failure: the execution is recorded and stamped, and the reaper sends it.
"""

from __future__ import annotations

import logging
import os
import threading

from celery import Celery
from kombu.exceptions import KombuError

from services.db.leases import LeaseStore
from services.db.session import Database, open_database, resolve_url
from services.settings import StudioSettings
from services.worker.admission import Admission
from services.worker.celery_config import configured_celery
from services.worker.handlers import handle_execute_node
from services.worker.names import TASK_EXECUTE_NODE, TASK_PROCESS_DELIVERY, broker_url
from services.worker.payloads import DeliveryPayload, ExecuteNodePayload, parse

log = logging.getLogger(__name__)

_apps: dict[tuple[str, str], Celery] = {}
_apps_lock = threading.Lock()
_databases: dict[tuple[int, str], Database] = {}


def producer_app(settings: StudioSettings) -> Celery:
    """One Celery app per broker and queue in this process (it holds the connection pool).

    It sends tasks by name and registers none (the worker's app does that).
    """
    key = (broker_url(settings) or "", settings.worker_queue)
    with _apps_lock:
        if key not in _apps:
            _apps[key] = configured_celery(settings)
        return _apps[key]


class Dispatcher:
    """A dispatch callable bound to settings (what the reaper is given)."""

    def __init__(self, settings: StudioSettings, *, app: Celery | None = None,
                 db: Database | None = None) -> None:
        self.settings = settings
        self._app = app
        self._db = db

    def __call__(self, execution_id: str) -> Admission | None:
        """Send the execution's task; answers ``None`` when sent, the decision when run here."""
        payload = parse(ExecuteNodePayload, {"execution_id": execution_id})
        if broker_url(self.settings) is None:
            return handle_execute_node(payload, self.settings)
        self._stamp(execution_id)
        app = self._app or producer_app(self.settings)
        app.send_task(TASK_EXECUTE_NODE, kwargs=payload.message(),
                      queue=self.settings.worker_queue)
        log.info("dispatched execution %s to queue %s", execution_id, self.settings.worker_queue)
        return None

    def _stamp(self, execution_id: str) -> None:
        LeaseStore(self._db or stamping_database(self.settings)).mark_dispatched(execution_id)


def stamping_database(settings: StudioSettings) -> Database:
    """One database handle per process and URL for the dispatch stamps (opening one per
    message would run SQLite's migration check each time; a forked process gets its own)."""
    key = (os.getpid(), resolve_url(settings))
    with _apps_lock:
        if key not in _databases:
            _databases[key] = open_database(settings)
        return _databases[key]


def dispatch_execution(execution_id: str, settings: StudioSettings) -> Admission | None:
    """Run ``execution_id`` through a worker (broker configured) or in this process (no broker)."""
    return Dispatcher(settings)(execution_id)


def dispatch_delivery(delivery_id: str, settings: StudioSettings) -> None:
    """Send ``studio.process_delivery`` for a recorded webhook delivery (a broker is
    configured: the API without one acts on deliveries itself). A broker that cannot be
    reached leaves the delivery ``queued``: a reaper's trigger pass acts on it later."""
    payload = parse(DeliveryPayload, {"delivery_id": delivery_id})
    try:
        producer_app(settings).send_task(TASK_PROCESS_DELIVERY, kwargs=payload.message(),
                                         queue=settings.worker_queue)
    except BROKER_UNREACHABLE as exc:
        log.warning("delivery %s recorded but not sent: the broker is unreachable (%s)",
                    delivery_id, type(exc).__name__)


BROKER_UNREACHABLE = (KombuError, OSError)
"""What sending a message raises when the broker cannot be reached (kombu wraps the client's
connection errors in its ``OperationalError``)."""


def dispatch_or_defer(execution_id: str, settings: StudioSettings) -> Admission | None:
    """:func:`dispatch_execution`, except that a broker that cannot be reached (down, being
    restarted) defers the execution instead of failing the caller: it is recorded and stamped
    dispatched, so a reaper sends it once it has stayed queued ``queued_timeout_s``. Answers
    ``None`` then, and logs one line (the error's type only: a broker URL may hold a password)."""
    try:
        return dispatch_execution(execution_id, settings)
    except BROKER_UNREACHABLE as exc:
        log.warning("execution %s recorded but not sent: the broker is unreachable (%s); a "
                    "reaper sends it again after queued_timeout_s", execution_id,
                    type(exc).__name__)
        return None
