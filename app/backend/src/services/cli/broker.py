"""The broker's dispatchers for the commands that may resume an execution (``executions
approve|deny|retry|discard``, ``killswitch off``), imported only when ``STUDIO_BROKER_URL`` is set.

Without a broker these commands dispatch nothing (they say how to resume the execution instead),
so they need neither Celery nor the worker's task bodies (the admission check, the executors, the
reaper): :func:`broker_dispatch` answers ``None`` before importing any of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.db.session import Database
    from services.flowcharts.service import NodeDispatch
    from services.settings import StudioSettings
    from services.worker.dispatch import Dispatcher


@dataclass(frozen=True)
class BrokerDispatch:
    """Where a resumed execution and a flowchart run's next nodes are sent."""

    execution: Dispatcher
    node: NodeDispatch | None


def broker_dispatch(settings: StudioSettings, db: Database | None = None) -> BrokerDispatch | None:
    """The broker's dispatchers (stamping through ``db`` when given), or ``None`` without a
    broker."""
    from services.worker.names import broker_url

    if broker_url(settings) is None:
        return None
    from services.worker.dispatch import Dispatcher
    from services.worker.flowchart_tasks import flowchart_dispatch

    return BrokerDispatch(Dispatcher(settings, db=db), flowchart_dispatch(settings))
