"""The API's trigger clock: without a broker there is no worker and so no reaper, yet pending
follow-ups must start after their debounce window, finished runs must release their slot (and
get their end comment) and deferred deliveries must start once the kill switch is released.
:class:`TriggerClock` is a daemon thread of the API process that runs the triggers' pass
(:func:`services.triggers.settle.settle`) every ``reaper_interval_s``, launching what it starts
the way the API launches executions."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.db.session import Database
from services.runs.leases import LeaseTimings
from services.settings import StudioSettings
from services.triggers.settle import settle

log = logging.getLogger(__name__)
FALLBACK_S = 30.0


class TriggerClock:
    def __init__(self, db: Database, settings: StudioSettings,
                 launch: Callable[[str], object]) -> None:
        self._db, self._settings, self._launch = db, settings, launch
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="studio-trigger-clock",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                settle(self._db, self._settings, self._launch)
                wait = max(LeaseTimings.from_db(self._db).reaper_interval_s, 0.1)
            except Exception:  # the database away a moment: try again later, never die
                log.exception("trigger clock: the pass failed")
                wait = FALLBACK_S
            self._stop.wait(wait)
