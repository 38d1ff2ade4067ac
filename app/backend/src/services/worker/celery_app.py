"""The worker's Celery application: the configuration plus every Studio task registered.

What ``studio worker`` consumes with (:mod:`services.worker.runner`). Producers send by task name
on the bare configured app (:func:`services.worker.dispatch.producer_app`), so nothing that sends
a task needs this module.
"""

from __future__ import annotations

from celery import Celery

from services.settings import StudioSettings
from services.worker.celery_config import configured_celery
from services.worker.flowchart_tasks import register_flowchart_tasks
from services.worker.tasks import register_tasks


def build_celery(settings: StudioSettings) -> Celery:
    """A Celery app for ``settings`` with the Studio tasks registered."""
    app = configured_celery(settings)
    register_tasks(app, settings)
    register_flowchart_tasks(app, settings)
    return app
