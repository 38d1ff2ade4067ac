"""Resuming what the kill switch paused, once it is released.

:func:`redispatch_paused` hands every paused execution (:mod:`services.db.pauses`) to the right
dispatcher: a flowchart node's goes back through its node task (the node runs its execution
again, which resumes, then advances the run), a standalone one through ``studio.execute_node``.
The reaper calls it on every pass, and so do the release commands (``studio killswitch off``,
``studio settings set killswitch_engaged false``, ``PUT /api/killswitch``, ``PUT
/api/settings/killswitch_engaged``) right away; the stamp in :meth:`PauseStore.due` lets each
execution be handed out once, whoever asks first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from services.db.pauses import PauseStore
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.telemetry import record

log = logging.getLogger(__name__)

NodeRedispatch = Callable[[str, str], Any]


def redispatch_paused(db: Database, dispatch: Callable[[str], Any],
                      dispatch_node: NodeRedispatch | None) -> list[str]:
    """Dispatch the executions paused by a kill switch that is now released; answers their ids
    (none while it is still engaged). Without ``dispatch_node``, flowchart nodes' executions are
    left for a caller that has one (a worker's reaper)."""
    store = PauseStore(db)
    bound = float(SettingsRepository(db).get("queued_timeout_s"))
    sent = []
    for paused in store.due(bound, standalone_only=dispatch_node is None):
        if paused.run_id is not None and paused.node_key is not None:
            assert dispatch_node is not None
            log.info("kill switch released: resuming flowchart run %s node %s (execution %s)",
                     paused.run_id, paused.node_key, paused.execution_id)
            dispatch_node(paused.run_id, paused.node_key)
        else:
            log.info("kill switch released: resuming execution %s", paused.execution_id)
            dispatch(paused.execution_id)
        record.reaper_dispatch("paused")
        sent.append(paused.execution_id)
    return sent
