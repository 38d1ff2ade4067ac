"""The kill switch at the API's door: new work refused while it is engaged, paused work resumed
as soon as it is released.

:func:`refuse_while_engaged` is a dependency of the routes that start work (``POST
/api/executions``, ``POST /api/flowcharts/{id}/runs``): while the kill switch is engaged they
answer 503 ``killswitch_engaged`` (retryable) and record nothing. :func:`resume_paused` runs after
a release through the API (``PUT /api/killswitch``, ``PUT /api/settings/killswitch_engaged``):
every execution the switch paused is dispatched again at once, standalone ones through the
launcher, flowchart nodes through the run's node dispatch (the reaper would do it at its next
pass otherwise).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import Depends, Request

from services.api.deps import get_db
from services.api.errors import ApiError, ErrorResponse
from services.api.launcher import Launcher
from services.api.node_children import node_children
from services.db.pauses import killswitch_engaged
from services.db.session import Database
from services.execution.errors import ErrorCode
from services.flowcharts.service import NodeDispatch
from services.runs.pauses import redispatch_paused

log = logging.getLogger(__name__)

#: For ``responses=`` of the routes that start work.
KILLSWITCH_RESPONSE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorResponse,
          "description": "The kill switch is engaged: nothing new starts (killswitch_engaged)."},
}


def refuse_while_engaged(db: Database = Depends(get_db)) -> None:  # noqa: B008
    """503 ``killswitch_engaged`` while the kill switch is engaged."""
    if killswitch_engaged(db):
        raise ApiError("the kill switch is engaged: no new execution or flowchart run starts "
                       "until it is released", code=ErrorCode.KILLSWITCH_ENGAGED,
                       retryable=True)


def resume_paused(db: Database, launcher: Launcher, dispatch_node: NodeDispatch) -> list[str]:
    """Dispatch what the kill switch paused (nothing while it is engaged); answers the ids."""
    resumed = redispatch_paused(db, launcher.launch, dispatch_node)
    if resumed:
        log.info("kill switch released: resumed %d paused executions", len(resumed))
    return resumed


def node_dispatch(request: Request, db: Database) -> NodeDispatch:
    """The node dispatch the flowchart routes use (broker, or a child process of the API)."""
    work = request.app.state.dispatch
    dispatch: NodeDispatch | None = work.flowchart_nodes
    return dispatch if dispatch is not None else node_children(db, request.app.state.settings) \
        .dispatch
