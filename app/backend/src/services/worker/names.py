"""What producers and consumers of the Studio tasks agree on: task names and the broker URL.

Imports nothing else of the worker (nor celery), so anything that sends or receives a task can
name it without pulling in the application, the tasks or the dispatcher. Task names are explicit
(``studio.*``) so they do not move with the module layout.
"""

from __future__ import annotations

from services.settings import StudioSettings

TASK_EXECUTE_NODE = "studio.execute_node"
TASK_REAP = "studio.reap"
TASK_RUN_FLOWCHART_NODE = "studio.run_flowchart_node"
TASK_PROCESS_DELIVERY = "studio.process_delivery"
EAGER_BROKER = "memory://"


def broker_url(settings: StudioSettings) -> str | None:
    """The configured broker URL, or ``None`` for the embedded (eager) default."""
    if settings.broker_url is None:
        return None
    return settings.broker_url.get_secret_value() or None
