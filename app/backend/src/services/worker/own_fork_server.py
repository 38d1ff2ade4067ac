"""A fork server for the executions a process runs itself: what ``studio api`` without a broker
uses (``STUDIO_WORKER_FORK_SERVER``, the worker's setting; on by default).

Without a broker the API runs each execution from one of its launcher's threads
(:mod:`services.api.launcher`), which waits on the execution's ``studio execute`` child
(:func:`services.worker.child.run_child`). :class:`OwnForkServer` gives those children a
:class:`~services.executors.forked.ForkServer` of the API's own, as ``studio worker`` has one
(:func:`services.worker.runner.process_model`), with the same guarantees: the server holds no
secret and nothing of any one execution, and each execution is still a process of its own.

* Lazily: nothing is started until the first execution (:meth:`OwnForkServer.ensure`, called
  when an execution is dispatched here). An API that runs no execution pays nothing; the one
  that does pays the server's warm-up once, and forks every execution after it.
* Nothing waits for it: the server is started without waiting (``wait=False``); until it says
  ready, executions are exec'ed as without it (:func:`~services.worker.child.run_child`).
* From a thread of its own that lives until :meth:`OwnForkServer.stop`: the server has
  ``PR_SET_PDEATHSIG`` towards the thread that started it (Linux binds it to the thread, not the
  process), so it must not be a launcher thread, which may end before the API does. It dies with
  the API (a ``SIGKILL`` of the API takes it and its children down, as the exec'ed children of
  the launcher's threads).

Importing this module costs nothing (``studio api`` does it at its start): the fork server's
client and :mod:`services.worker.child` are imported by the owner thread.
"""

from __future__ import annotations

import logging
import threading

from services.settings import ExecutorKind, StudioSettings, process_environment

log = logging.getLogger(__name__)


class OwnForkServer:
    """This process's fork server for :func:`~services.worker.child.run_child`, started at the
    first :meth:`ensure` (when ``settings`` use it: the local executor and
    ``STUDIO_WORKER_FORK_SERVER`` on), stopped by :meth:`stop`."""

    def __init__(self, settings: StudioSettings) -> None:
        self.wanted = settings.worker_fork_server and settings.executor is ExecutorKind.LOCAL
        self._lock = threading.Lock()
        self._owner: threading.Thread | None = None
        self._stopping = threading.Event()

    def ensure(self) -> None:
        """Start the server (once, from a thread of its own) unless it is not wanted, started
        or stopped; returns at once."""
        if not self.wanted:
            return
        with self._lock:
            if self._owner is not None or self._stopping.is_set():
                return
            self._owner = threading.Thread(target=self._own, name="studio-fork-server",
                                           daemon=True)
            self._owner.start()

    def stop(self) -> None:
        """Stop the server (it exits once its children have ended); idempotent."""
        with self._lock:
            self._stopping.set()
            owner = self._owner
        if owner is not None and owner is not threading.current_thread():
            owner.join()

    def _own(self) -> None:
        """The owner thread: start the server, hand it to ``run_child``, and wait for
        :meth:`stop` (the server lives as long as this thread)."""
        from services.execution.errors import SubstrateError
        from services.executors.forked import ForkServer
        from services.worker.child import use_fork_server

        try:
            server = ForkServer.start(process_environment(), wait=False)
        except SubstrateError as exc:
            log.warning("fork server: %s; executions are exec'ed", exc)
            return
        use_fork_server(server)
        try:
            self._stopping.wait()
        finally:
            use_fork_server(None)
            server.stop()
