"""Starting a Celery worker in this process: what ``studio worker`` does.

By default (``STUDIO_WORKER_FORK_SERVER``, :func:`process_model`) a pool of ``concurrency``
threads consumes ``STUDIO_WORKER_QUEUE``: a slot only supervises its execution's process, forked
from the worker's fork server (:mod:`services.executors.forked`, started here from the main
thread: it dies with the worker's main process, its children with it), and the slots share one
database. With the setting off, a prefork pool of ``concurrency`` processes consumes it instead;
Celery's prefork pool has each pool process die with the worker's main process
(``PR_SET_PDEATHSIG``, set in its process initializer), and each execution runs in an exec'ed
child of a pool process, which dies with it; each task opens its own database. A Kubernetes
worker's slots supervise Jobs either way.
Optionally a :class:`~services.worker.reaper_loop.ReaperLoop` thread re-dispatches executions
whose lease expired. Gossip, mingle and the worker heartbeat are off: workers coordinate through
leases in the database, not through each other.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from services.composition import auth_modes
from services.db.session import open_database
from services.execution.errors import ConfigError
from services.execution.providers.profiles import configured_providers
from services.executors.forked import ForkServer
from services.settings import ExecutorKind, StudioSettings, process_environment
from services.worker.broker_client import import_broker_client
from services.worker.celery_app import build_celery
from services.worker.celery_config import node_name
from services.worker.child import use_fork_server
from services.worker.dispatch import Dispatcher
from services.worker.flowchart_tasks import flowchart_dispatch
from services.worker.names import broker_url
from services.worker.reaper_loop import ReaperLoop
from services.worker.startup_checks import check_broker, check_database
from services.worker.task_database import use_worker_database, worker_database

if TYPE_CHECKING:
    from celery import Celery

log = logging.getLogger(__name__)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL")


def run_worker(settings: StudioSettings, *, concurrency: int, reaper: bool,
               loglevel: str = "INFO") -> None:
    """Run a worker (and the reaper) until it is stopped (SIGTERM: warm shutdown)."""
    if broker_url(settings) is None:
        raise ConfigError("studio worker needs a broker: set STUDIO_BROKER_URL "
                          "(without one, executions run in the process that dispatches them)")
    if loglevel.upper() not in LOG_LEVELS:  # what Celery's command line refused
        raise ConfigError(f"--loglevel {loglevel!r} is not one of {', '.join(LOG_LEVELS)}")
    if settings.executor is ExecutorKind.KUBERNETES:
        from services.executors.selection import kube_api_client  # only this worker needs it

        kube_api_client(settings)  # no usable Kubernetes configuration: refuse at start
    import_broker_client()
    app = build_celery(settings)
    check_database(settings)
    check_broker(app, settings)
    with process_model(settings) as pool:
        loop = ReaperLoop(settings, Dispatcher(settings, app=app),
                          flowchart_dispatch(settings, app=app)) if reaper else None
        if loop is not None:
            loop.start()
        try:
            consume(app, pool=pool, concurrency=concurrency, queue=settings.worker_queue,
                    loglevel=loglevel)
        finally:
            if loop is not None:
                loop.stop()


def consume(app: Celery, *, pool: str, concurrency: int, queue: str, loglevel: str) -> None:
    """What ``celery worker --pool=POOL --concurrency=N --queues=QUEUE --hostname=NODE
    --loglevel=LEVEL --without-gossip --without-mingle --without-heartbeat`` does (Celery's
    ``worker`` command, as ``app.worker_main`` ran it), without Celery's command line: that
    imports click-repl, prompt_toolkit and pygments into the worker, about 11 MB of its memory
    for nothing (issue 39)."""
    from celery.platforms import maybe_drop_privileges
    from celery.utils.log import mlevel
    from celery.utils.nodenames import default_nodename, host_format

    maybe_drop_privileges()
    app.Worker(
        hostname=host_format(default_nodename(node_name())), pool_cls=pool,
        concurrency=concurrency, queues=[queue], loglevel=mlevel(loglevel.upper()),
        without_gossip=True, without_mingle=True, without_heartbeat=True,
    ).start()


@contextmanager
def process_model(settings: StudioSettings) -> Iterator[str]:
    """The Celery pool this worker runs, and what goes with it until the worker stops.

    ``threads`` (``STUDIO_WORKER_FORK_SERVER``, the default): a fork server (for the local
    executor) that the slots fork their children from, told the providers whose credentials
    this worker's environment configures (their SDKs are imported before it is ready), and one
    database every slot borrows.
    ``prefork`` (the setting off): nothing here; each task opens its own database (no engine is
    opened before the pool forks) and each execution is an exec'ed ``studio execute``.
    """
    if not settings.worker_fork_server:
        yield "prefork"
        return
    # from this (main, long-lived) thread, before any other: it dies with the worker
    # it imports the SDKs of the providers this deployment has credentials for before it is
    # ready (their first executions pay no import); the others' with their first execution
    environment = process_environment()
    server = (ForkServer.start(environment, wait=False,
                               providers=configured_providers(auth_modes(settings), environment))
              if settings.executor is ExecutorKind.LOCAL else None)
    use_fork_server(server)
    use_worker_database(open_database(settings))
    try:
        yield "threads"
    finally:
        use_fork_server(None)
        if server is not None:
            server.stop()
        shared = worker_database()
        use_worker_database(None)
        if shared is not None:
            shared.dispose()


def run_reaper(settings: StudioSettings, *, loglevel: str = "INFO") -> None:
    """Run reaper passes in this thread until interrupted (SIGTERM / Ctrl-C)."""
    if broker_url(settings) is None:
        raise ConfigError("studio reaper needs a broker: set STUDIO_BROKER_URL")
    logging.basicConfig(level=loglevel.upper())
    import_broker_client()
    app = build_celery(settings)
    check_database(settings)
    check_broker(app, settings)
    loop = ReaperLoop(settings, Dispatcher(settings, app=app),
                      flowchart_dispatch(settings, app=app))
    signal.signal(signal.SIGTERM, lambda *_: loop.stop())
    try:
        loop.run()
    except KeyboardInterrupt:
        loop.stop()
