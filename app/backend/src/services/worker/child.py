"""Running one execution as a child process: ``studio execute <execution_id>``.

The task never runs the agent in its own process: a crash of the agent (or of an SDK under it)
ends the child, not the worker. The child comes from
:class:`~services.executors.local.LocalSubstrate`: its own process group, an allowlisted
environment, and ``PR_SET_PDEATHSIG`` so that it dies with the process that started it. In a
worker that is a prefork pool process, which itself dies with the worker's main process (Celery's
prefork pool sets ``PR_SET_PDEATHSIG`` in every pool process): a ``SIGKILL`` of the worker takes
the whole chain down, the lease stops being renewed and the reaper re-dispatches the execution.
"""

from __future__ import annotations

import logging

from services.executors.base import SubstrateStatus
from services.executors.local import LocalSubstrate, executor_environment
from services.settings import process_environment

log = logging.getLogger(__name__)

WAIT_SLICE_S = 30.0


def run_child(execution_id: str) -> SubstrateStatus:
    """Start ``studio execute <execution_id>`` and wait for it; its final status.

    If waiting is interrupted (worker shutdown, a time limit), the child is cancelled first.
    """
    substrate = LocalSubstrate(env=executor_environment(process_environment()))
    handle = substrate.launch(execution_id)
    status = SubstrateStatus.RUNNING
    try:
        while status is SubstrateStatus.RUNNING:
            status = substrate.wait(handle, WAIT_SLICE_S)
    finally:
        if status is SubstrateStatus.RUNNING:
            log.warning("worker: stopping the child of execution %s", execution_id)
            substrate.cancel(handle)
    return status

