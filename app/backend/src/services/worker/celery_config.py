"""The Celery configuration, from :class:`~services.settings.StudioSettings` (no tasks here).

The broker is ``STUDIO_BROKER_URL`` (Redis in production). There is no result backend: a task's
outcome is the execution row and its journal, never a Celery result. The settings that matter:

``task_acks_late``
    a message is acknowledged when its task returns, not when a worker takes it, so a worker
    that dies mid-task leaves the message unacknowledged and the broker delivers it again;
``task_reject_on_worker_lost``
    when a pool process dies under a task, the message is requeued instead of failed;
``worker_prefetch_multiplier = 1`` and ``worker_disable_prefetch``
    a worker takes a message only when a pool slot is free: a node execution runs for minutes,
    and a prefetched message would wait behind it while another worker sits idle (and die with
    its worker if that is killed);
``visibility_timeout`` (``STUDIO_BROKER_VISIBILITY_TIMEOUT_S``, default 300 s)
    Redis hands an unacknowledged message (its worker was killed) to another worker once this
    long has passed since delivery; every worker sweeps for such messages every few seconds
    (``unacked_restore_interval``). A message whose execution is still running is delivered
    again too, and ignored (a live lease). Independently, the reaper re-dispatches an execution
    that stayed queued, never claimed, for ``queued_timeout_s`` (:mod:`services.runs.reaper`);
explicit task names
    ``studio.execute_node``, ``studio.reap`` and ``studio.run_flowchart_node``
    (:mod:`services.worker.names`), so producers and consumers agree on names that do not move
    with the module layout.

:func:`configured_celery` is the bare application a producer sends with;
:func:`services.worker.celery_app.build_celery` adds the tasks a worker runs. Without a broker the
application has ``task_always_eager`` on the in-memory transport;
:func:`services.worker.dispatch.dispatch_execution` does not go through Celery at all in that case
(it calls the task body directly).
"""

from __future__ import annotations

import logging
import os
import socket

from celery import Celery

from services.settings import StudioSettings
from services.worker.names import EAGER_BROKER, broker_url

log = logging.getLogger(__name__)

RESTORE_SWEEP_S = 5  # how often a worker looks for unacknowledged messages past their timeout


def configured_celery(settings: StudioSettings) -> Celery:
    """A Celery app for ``settings``, configured, with no task registered."""
    broker = broker_url(settings)
    app = Celery("studio", broker=broker or EAGER_BROKER, set_as_current=False)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_disable_prefetch=True,
        broker_transport_options={
            "visibility_timeout": settings.broker_visibility_timeout_s,
            "unacked_restore_interval": RESTORE_SWEEP_S,
            "unacked_restore_throttle": 1,
        },
        task_default_queue=settings.worker_queue,
        task_ignore_result=True,
        result_backend=None,
        task_always_eager=broker is None,
        task_eager_propagates=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_send_task_events=False,
        enable_utc=True,
    )
    return app


def node_name() -> str:
    """A worker node name unique on this host (two workers on one machine must not clash)."""
    return f"studio-{os.getpid()}@{socket.gethostname()}"
