"""The Studio tasks, explicitly named; each validates its typed payload and hands off.

``studio.execute_node(execution_id=...)``
    runs one node execution in a child process (:func:`~services.worker.handlers.
    handle_execute_node`); a redelivery while a live lease is held, or for a finished execution,
    is a logged no-op. Answers the admission decision (``run``, ``lease_held``, ...).
``studio.process_delivery(delivery_id=...)``
    acts on a recorded GitHub webhook delivery (:func:`services.triggers.processing.
    process_delivery`): permission, fork, the slot; answers the delivery's outcome.
``studio.reap()``
    one reaper pass: re-dispatches the executions whose lease expired. ``studio worker`` runs
    the pass in a loop of its own; the task is there for deployments that schedule it (beat).

Tasks take keyword arguments only, so that the payload model, not Celery's signature check, is
what decides whether a message is valid.
"""

from __future__ import annotations

from typing import Any

from celery import Celery

from services.db.session import open_database
from services.settings import StudioSettings
from services.worker.dispatch import Dispatcher
from services.worker.handlers import handle_execute_node, reap_once
from services.worker.names import TASK_EXECUTE_NODE, TASK_PROCESS_DELIVERY, TASK_REAP
from services.worker.payloads import DeliveryPayload, ExecuteNodePayload, ReapPayload, parse


def register_tasks(app: Celery, settings: StudioSettings) -> None:
    """Register the Studio tasks on ``app`` (called by :func:`~services.worker.celery_app.
    build_celery`)."""

    @app.task(name=TASK_EXECUTE_NODE, shared=False, acks_late=True,
              reject_on_worker_lost=True)
    def execute_node(**kwargs: Any) -> str:
        payload = parse(ExecuteNodePayload, kwargs)
        return handle_execute_node(payload, settings,
                                   dispatch=Dispatcher(settings, app=app)).value

    @app.task(name=TASK_PROCESS_DELIVERY, shared=False, acks_late=True)
    def process_delivery(**kwargs: Any) -> str:
        payload = parse(DeliveryPayload, kwargs)
        from services.triggers.processing import process_delivery as process

        db = open_database(settings)
        try:
            return process(db, settings, payload.delivery_id, Dispatcher(settings, app=app))
        finally:
            db.dispose()

    @app.task(name=TASK_REAP, shared=False, acks_late=True)
    def reap(**kwargs: Any) -> list[str]:
        parse(ReapPayload, kwargs)
        db = open_database(settings)
        try:
            return reap_once(db, settings, Dispatcher(settings, app=app))
        finally:
            db.dispose()
