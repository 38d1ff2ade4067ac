"""``studio.run_flowchart_node(run_id, node_id)``: one work node of a flowchart run, as a task.

The task body is :meth:`services.flowcharts.service.FlowchartRunService.run_node`: it runs the node
(an agent node through :class:`~services.runs.service.ExecutionService`, a command node through the
command domain) in the worker process, records its outcome and advances the run, which
dispatches the next ready nodes through :func:`flowchart_dispatch`. With a broker, that sends
one task per node to the worker queue; without one (the embedded default) the node runs right
here, synchronously. The body is idempotent: a redelivered message for a node that is no longer
running is a no-op, and a node whose execution already finished is completed from that row.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from uuid import UUID

from celery import Celery
from pydantic import BaseModel, ConfigDict, Field

from services.db.session import open_database
from services.flowcharts.node_ids import NODE_ID_PATTERN
from services.settings import StudioSettings
from services.worker.dispatch import producer_app
from services.worker.names import TASK_RUN_FLOWCHART_NODE, broker_url
from services.worker.payloads import parse

if TYPE_CHECKING:
    from services.flowcharts.service import NodeDispatch

log = logging.getLogger(__name__)

class FlowchartNodePayload(BaseModel):
    """``studio.run_flowchart_node``: a run id and the id of a node in its graph."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run_id: UUID
    node_id: str = Field(pattern=NODE_ID_PATTERN)

    def message(self) -> dict[str, str]:
        return {"run_id": str(self.run_id), "node_id": self.node_id}


def handle_flowchart_node(payload: FlowchartNodePayload, settings: StudioSettings, *,
                          app: Celery | None = None) -> None:
    """Run the node against the configured database, then advance its run."""
    # the engine, imported by the first node a worker runs (not by a worker that only
    # supervises executions: :mod:`services.worker.runner`)
    from services.flowcharts.service import FlowchartRunService

    db = open_database(settings)
    try:
        service = FlowchartRunService(db, settings, dispatch=flowchart_dispatch(settings, app=app))
        service.run_node(str(payload.run_id), payload.node_id)
    finally:
        db.dispose()


def flowchart_dispatch(settings: StudioSettings, *,
                       app: Celery | None = None) -> NodeDispatch | None:
    """Send a task per ready node when a broker is configured; ``None`` (run in process) else."""
    if broker_url(settings) is None:
        return None

    def send(run_id: str, node_id: str) -> None:
        payload = parse(FlowchartNodePayload, {"run_id": run_id, "node_id": node_id})
        (app or producer_app(settings)).send_task(
            TASK_RUN_FLOWCHART_NODE, kwargs=payload.message(), queue=settings.worker_queue)
        log.info("dispatched flowchart run %s node %s", run_id, node_id)

    return send


def register_flowchart_tasks(app: Celery, settings: StudioSettings) -> None:
    """Register ``studio.run_flowchart_node`` on ``app``."""

    @app.task(name=TASK_RUN_FLOWCHART_NODE, acks_late=True, reject_on_worker_lost=True)
    def run_flowchart_node(**kwargs: Any) -> None:
        handle_flowchart_node(parse(FlowchartNodePayload, kwargs), settings, app=app)
