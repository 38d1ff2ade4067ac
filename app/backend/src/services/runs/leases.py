"""Execution leases: one live owner per execution, fenced by an epoch, kept alive by a heartbeat.

A lease is three columns of ``node_executions``: ``lease_owner`` (``host:pid:random``),
``lease_epoch`` and ``lease_expires_at``. Every operation is one conditional ``UPDATE``:

* claiming (:meth:`~services.db.leases.LeaseStore.claim`) succeeds when the execution is not
  final and nobody holds a live lease (no owner, or ``lease_expires_at`` in the past); it bumps
  the epoch and answers it;
* a heartbeat (:meth:`~services.db.leases.LeaseStore.heartbeat`) extends the lease while the owner
  and the epoch still match; a heartbeat that matches nothing means the lease was lost (taken
  over after it expired);
* releasing (:meth:`~services.db.leases.LeaseStore.release`) gives it up (the epoch stays, so a
  later claim bumps past it).

A renewal that matches nothing means the lease is lost: the holder stops at once (its next
check raises ``StaleLease``, its pushes are refused). A renewal that fails because the connection
dropped is not a lost lease: the store reconnects and renews again, a few times with backoff
(:mod:`services.db.connection_loss`), and the next beat tries again after that.
The holder fences itself too: :class:`Heartbeat` remembers when the lease was last renewed
and, once :attr:`LeaseTimings.fence_s` has passed without a renewal (the database unreachable,
the process starved), it marks the lease lost and calls its ``on_lapse`` handler (``studio
execute`` kills what it started and exits) *before* the lease can expire and another attempt
claim it. ``fence_s`` is ``lease_ttl_s`` minus the smaller of ``heartbeat_s`` and a third of the
TTL.

The epoch is the fence: the journal (``DbEventSink(lease_epoch=...)``), the tool-call records
and workspace checkpoints, every status update of the durable path, and every push compare it
with the row and raise :class:`~services.db.journal.StaleLease` when it moved on, so a process
that lost its lease can neither write nor push. Times are this process's UTC clock
(:func:`~services.db.base.utcnow`); keep executor clocks synchronised (NTP) and the TTL well
above the heartbeat interval.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.db.journal import StaleLease
from services.db.leases import LeaseStore, stale
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database, DatabaseError
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import GitAuth, RunControl

log = logging.getLogger(__name__)



def new_owner() -> str:
    """A lease owner name unique to this process and call: ``host:pid:random``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseTimings:
    """Lease TTL, heartbeat and reaper intervals (runtime settings)."""

    ttl_s: float = 60.0
    heartbeat_s: float = 15.0
    reaper_interval_s: float = 30.0

    @property
    def fence_s(self) -> float:
        """How long after its last renewal a holder stops itself: before the TTL runs out."""
        return self.ttl_s - min(self.heartbeat_s, self.ttl_s / 3)

    @classmethod
    def from_db(cls, db: Database) -> LeaseTimings:
        repo = SettingsRepository(db)
        return cls(ttl_s=float(repo.get("lease_ttl_s")),
                   heartbeat_s=float(repo.get("heartbeat_s")),
                   reaper_interval_s=float(repo.get("reaper_interval_s")))


@dataclass
class Lease:
    """A lease this process holds: the fence every write and push checks."""

    store: LeaseStore
    execution_id: str
    owner: str
    epoch: int
    timings: LeaseTimings
    lost: threading.Event = field(default_factory=threading.Event)
    # time.monotonic() taken before the claim or the last successful renewal: the lease lasts
    # at least ``ttl_s`` from then.
    renewed_at: float = field(default_factory=time.monotonic)

    def check(self) -> None:
        """Raise :class:`StaleLease` unless this lease's epoch is still the execution's."""
        if self.lost.is_set():
            raise stale(self.execution_id, self.epoch)
        if self.store.current_epoch(self.execution_id) != self.epoch:
            self.lost.set()
            raise stale(self.execution_id, self.epoch)

    def update(self, **values: Any) -> None:
        """Update the execution row, fenced by the epoch."""
        try:
            self.store.guarded_update(self.execution_id, self.epoch, values)
        except StaleLease:
            self.lost.set()
            raise

    def release(self, status: ExecutionStatus | None = None, *, yielded: bool = False) -> None:
        """Give the lease up (with ``status``, set in the same fenced statement; ``yielded``:
        see :meth:`LeaseStore.release`)."""
        self.store.release(self.execution_id, self.owner, self.epoch, status, yielded=yielded)


LapseHandler = Callable[["Lease"], None]


class Heartbeat:
    """Daemon threads renewing a lease every ``heartbeat_s`` until stopped or lost, and fencing
    the holder off (``on_lapse``) when no renewal succeeded for ``fence_s``."""

    def __init__(self, lease: Lease, on_lapse: LapseHandler | None = None) -> None:
        self.lease = lease
        self.on_lapse = on_lapse
        self._stop = threading.Event()
        name = lease.execution_id[:8]
        self._threads = [threading.Thread(target=self._beat, daemon=True,
                                          name=f"lease-heartbeat-{name}"),
                         threading.Thread(target=self._watch, daemon=True,
                                          name=f"lease-watchdog-{name}")]

    def __enter__(self) -> Heartbeat:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join()

    def _beat(self) -> None:
        lease = self.lease
        while not self._stop.wait(lease.timings.heartbeat_s):
            started = time.monotonic()
            try:
                held = lease.store.heartbeat(lease.execution_id, lease.owner, lease.epoch,
                                             lease.timings.ttl_s)
            except (OSError, DatabaseError) as exc:  # the database is gone for now (the
                # renewal already reconnected and ran again, see LeaseStore.heartbeat): the next
                # beat tries again, the watchdog fences this holder if none succeeds in time
                log.warning("lease heartbeat of %s failed (%s); retrying at the next beat",
                            lease.execution_id, type(exc).__name__)
                continue
            if not held:  # taken over: the loop stops at its next check (StaleLease)
                if not lease.lost.is_set():  # else given up on purpose (a kill switch pause)
                    log.warning("lease of %s (epoch %d) was lost", lease.execution_id,
                                lease.epoch)
                lease.lost.set()
                return
            lease.renewed_at = started

    def _watch(self) -> None:
        lease = self.lease
        while True:
            left = lease.renewed_at + lease.timings.fence_s - time.monotonic()
            if left <= 0:
                log.error("execution %s: no lease renewal for %.1fs; this attempt (epoch %d) "
                          "stops before its lease can expire", lease.execution_id,
                          lease.timings.fence_s, lease.epoch)
                self._lapse()
                return
            if self._stop.wait(min(left, lease.timings.heartbeat_s)) or lease.lost.is_set():
                return

    def _lapse(self) -> None:
        if self._stop.is_set():
            return
        self.lease.lost.set()
        if self.on_lapse is not None:
            self.on_lapse(self.lease)


class LeaseControl:
    """A RunControl that stops the loop at once (``StaleLease``) when the lease was lost,
    then asks the wrapped control (kill switch, cancellation)."""

    def __init__(self, inner: RunControl, lease: Lease) -> None:
        self.inner = inner
        self.lease = lease

    def check(self) -> ErrorCode | None:
        if self.lease.lost.is_set():
            raise stale(self.lease.execution_id, self.lease.epoch)
        return self.inner.check()


class LeaseGuardedGitAuth:
    """``GitAuth`` for pushes and fetches: checks the lease epoch right before handing out the
    credentials, so a process that lost its lease cannot push (the git tool answers an error).
    ``inner`` is ``None`` for remotes that need no token."""

    def __init__(self, inner: GitAuth | None, lease: Lease) -> None:
        self.inner = inner
        self.lease = lease

    def environment(self, remote_url: str) -> Mapping[str, str]:
        try:
            self.lease.check()
        except StaleLease as exc:
            raise ToolFailure(ErrorCode.CANCELLED, "this process no longer holds the "
                              "execution's lease; it may not push", details=exc.details) from None
        return self.inner.environment(remote_url) if self.inner is not None else {}
