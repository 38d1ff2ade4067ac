"""A lost database connection is a transient fault, not a crash.

A database failover, a connection pooler restart or an idle-connection reaper ends a process's
PostgreSQL sessions under it (``terminating connection due to administrator command``) and may
refuse new ones for a few seconds. Two mechanisms ride that out, both here:

* **reconnect** (:func:`wait_for_reconnects`, on every engine of :mod:`services.db.session`): a
  database this process has already reached is expected back, so opening a connection to it is
  tried again with backoff (:data:`RECONNECT_BACKOFF_S`) for up to :data:`RECONNECT_WINDOW_S` per
  outage. A database never reached (a wrong ``STUDIO_DATABASE_URL``, a server that is not there)
  is not waited for: that is configuration, answered at once. The pool's pre-ping replaces a
  pooled connection that died while idle.
* **re-run** (:func:`rerun`): a statement or transaction cut by a lost connection is run again,
  whole, on a fresh connection, at most :data:`RERUNS` times. Only what is safe to run twice is
  wrapped: reads; the journal append (keyed by its sequence numbers: before running a cut commit
  again, :mod:`services.db.journal_pg` asks whether it landed); the lease renewal (keyed by owner
  and epoch); the idempotency records (keyed by call id, first write wins).

Other errors (a statement refused, a constraint) are not retried. What was retried is counted
(:func:`retries`); when it was not enough, :class:`ConnectionLost` says so, and the CLI prints
``database connection lost during the run; retried N times`` instead of a configuration line.
The lease holder's heartbeat (:mod:`services.runs.leases`) renews through both and still fences
itself if no renewal succeeded before ``fence_s``.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Engine, event
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

log = logging.getLogger(__name__)

T = TypeVar("T")

RECONNECT_WINDOW_S = 20.0
"""How long one outage is waited for (well inside the default lease's fence, 45 s)."""
RECONNECT_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)
"""The pauses between connection attempts (the last one repeats)."""
RERUNS = 3
"""How many times a cut statement is run again (each run may wait for a reconnect)."""

# SQLSTATEs of a session ended under the client: class 08 (connection exception), and the
# server shutting down or not yet accepting connections (class 57P).
_LOST_STATES = ("57P01", "57P02", "57P03")


class ConnectionLost(SQLAlchemyError):
    """The database stayed unreachable through every retry (a ``DatabaseError`` still, for
    the callers that catch those)."""

    def __init__(self, what: str, retried: int, reason: str) -> None:
        super().__init__(f"database connection lost during the run; retried {retried} times "
                         f"({what}: {reason})")
        self.what = what
        self.retried = retried
        self.reason = reason


class _Counters:
    """This process's view of the database: reached at least once, retries made, since when
    connecting fails."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reached: set[str] = set()  # the databases (URL, no password) connected to once
        self.retries = 0
        self.outage_since: float | None = None

    def count(self) -> int:
        with self.lock:
            self.retries += 1
            return self.retries


_COUNTERS = _Counters()


def retries() -> int:
    """Reconnects and re-runs this process made so far."""
    return _COUNTERS.retries


def reached_before() -> bool:
    """Whether this process has reached a database (so an error now is a fault, not
    configuration)."""
    return bool(_COUNTERS.reached)


def is_connection_lost(exc: BaseException) -> bool:
    """Whether ``exc`` means the connection (not the statement) failed."""
    if isinstance(exc, DBAPIError):
        if exc.connection_invalidated:
            return True
        orig: BaseException | None = exc.orig
    else:
        orig = exc
    psycopg = sys.modules.get("psycopg")
    if orig is None or psycopg is None:
        return False
    if isinstance(orig, psycopg.InterfaceError):  # "the connection is closed"
        return True
    if not isinstance(orig, psycopg.OperationalError):
        return False
    state = getattr(orig, "sqlstate", None)
    # no SQLSTATE: libpq's own error (refused, reset, "server closed the connection")
    return state is None or state.startswith("08") or state in _LOST_STATES


def rerun(what: str, run: Callable[[], T], *,
          before_rerun: Callable[[], T | None] | None = None) -> T:
    """``run()``; run again (at most :data:`RERUNS` times) when a lost connection cut it.

    ``before_rerun``: asked before each new run, on a fresh connection: a value means the cut
    run did complete (a write whose answer was lost) and is returned instead of running again.
    """
    attempt = 0
    while True:
        try:
            if attempt and before_rerun is not None:
                landed = before_rerun()
                if landed is not None:
                    return landed
            return run()
        except Exception as exc:
            if not is_connection_lost(exc):
                raise
            if attempt >= RERUNS:
                raise ConnectionLost(what, retries(), _reason(exc)) from exc
            attempt += 1
            count = _COUNTERS.count()
            log.warning("database connection lost (%s); running it again (retry %d): %s",
                        what, count, _reason(exc))
            time.sleep(RECONNECT_BACKOFF_S[min(attempt - 1, len(RECONNECT_BACKOFF_S) - 1)])


def _reason(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    first = next((line.strip() for line in str(orig).splitlines() if line.strip()), "")
    return first[:200] or type(orig).__name__


def wait_for_reconnects(engine: Engine) -> None:
    """Make ``engine`` wait (with backoff, up to :data:`RECONNECT_WINDOW_S` per outage) for a
    database it has reached before when opening a connection fails."""
    key = engine.url.render_as_string(hide_password=True)  # any engine of this process

    @event.listens_for(engine, "connect")
    def _reached(_dbapi_connection: Any, _record: Any) -> None:
        with _COUNTERS.lock:
            _COUNTERS.reached.add(key)
            _COUNTERS.outage_since = None

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        if key not in _COUNTERS.reached:
            return None  # never reached: configuration, answered by the default connect
        attempt = 0
        while True:
            try:
                return dialect.connect(*cargs, **cparams)
            except Exception as exc:
                if not isinstance(exc, dialect.loaded_dbapi.Error):
                    raise
                now = time.monotonic()
                with _COUNTERS.lock:
                    since = _COUNTERS.outage_since = _COUNTERS.outage_since or now
                if now - since >= RECONNECT_WINDOW_S:
                    raise  # this outage was waited for long enough: fail at once
                count = _COUNTERS.count()
                delay = RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S) - 1)]
                log.warning("database unreachable; connecting again in %.2fs (retry %d): %s",
                            delay, count, _reason(exc))
                attempt += 1
                time.sleep(min(delay, max(since + RECONNECT_WINDOW_S - now, 0.0)))
