"""Running one execution out of the worker's process: ``studio execute <execution_id>``.

``STUDIO_EXECUTOR`` picks where (:func:`services.executors.selection.build_substrate`):

* ``local``: a child process, exec'ed (``studio execute`` in a fresh interpreter), or forked
  from the worker's fork server (:mod:`services.executors.forked`) when ``studio worker`` runs
  one (``STUDIO_WORKER_FORK_SERVER``, the default) and it is ready (a worker's first executions,
  while its fork server warms up, are exec'ed: they never wait for it). The task never runs the
  agent in its own process: a crash of the agent (or of an SDK under it) ends the child, not
  the worker. Either way the child has its own process group, the allowlisted environment of
  :func:`~services.executors.local.executor_environment`, and ``PR_SET_PDEATHSIG`` so that it
  dies with the process that started it. With the fork server (the default) that is the fork
  server, which dies with the worker's main process; with the setting off it is a prefork pool
  process, which itself dies with the worker's main process (Celery's prefork pool sets
  ``PR_SET_PDEATHSIG`` in every pool process): a ``SIGKILL`` of the worker takes the whole
  chain down, the lease stops being renewed and the reaper re-dispatches.
* ``kubernetes``: a Job, supervised through the watch API in slices of ``KUBE_SLICE_S``; between
  slices the task reads the execution's cancel request from the database and, when it is set,
  deletes the Job (foreground propagation: the pod goes first). The worker
  needs Kubernetes access for that; the API does not (it only records the request). A redelivered
  task whose Job still runs adopts it; a worker that dies leaves the Job running (its pod holds
  the lease).
"""

from __future__ import annotations

import logging

from services.db.control import DbRunControl
from services.db.executions import ExecutionRepository
from services.db.session import Database
from services.execution.errors import ErrorCode, SubstrateError
from services.executors.base import Handle, Substrate, SubstrateStatus
from services.executors.forked import ForkedSubstrate, ForkServer
from services.executors.local import executor_environment
from services.repos.integration_store import IntegrationStore
from services.settings import ExecutorKind, StudioSettings, get_settings, process_environment
from services.telemetry import tracing
from services.worker.handed import handed_secrets
from services.worker.task_database import task_database

log = logging.getLogger(__name__)

WAIT_SLICE_S = 30.0
KUBE_SLICE_S = 10.0

_fork_server: ForkServer | None = None


def use_fork_server(server: ForkServer | None) -> None:
    """Fork local children from ``server`` (``studio worker`` starts one unless
    ``STUDIO_WORKER_FORK_SERVER`` is off); None: exec them."""
    global _fork_server
    _fork_server = server


def run_child(execution_id: str, *, db: Database, provider: str | None = None,
              mcp: bool = False) -> SubstrateStatus:
    """Start ``studio execute <execution_id>`` and wait for it; its final status. ``db``: the
    worker task's database (:mod:`services.worker.task_database`), the only one it opens;
    ``provider`` (the execution's) and ``mcp`` (whether it may start MCP servers), as the task
    read them: the fork server loads that SDK and the MCP client once, for every later child.

    If waiting is interrupted (worker shutdown, a time limit), a local child is cancelled first;
    a Kubernetes Job runs on (its pod holds the lease; a redelivery adopts it).
    """
    settings = get_settings()
    github_token = (settings.executor is ExecutorKind.LOCAL
                    or _on_integration_origin(settings, execution_id, db))
    # the child (a process, a pod) continues this task's trace: TRACEPARENT in its environment
    environment = {**process_environment(), **tracing.environment()}
    server = _fork_server
    substrate: Substrate
    if (settings.executor is ExecutorKind.LOCAL and server is not None and server.alive()
            and server.ready()):
        # the same environment as an exec'ed child's (LocalSubstrate), forked warm; while
        # the server still warms up, the child is exec'ed (below): nothing waits for it
        substrate = ForkedSubstrate(server, executor_environment(environment), provider=provider,
                                    mcp=mcp)
    else:
        # the Kubernetes client (about 40 MB) is imported only by a worker that needs it
        from services.executors.selection import build_substrate

        substrate = build_substrate(settings, environment, github_token=github_token,
                                    handed=handed_secrets(settings, execution_id, db))
    try:
        handle = substrate.launch(execution_id)
    except SubstrateError:
        if not isinstance(substrate, ForkedSubstrate):
            raise
        log.warning("worker: the fork server could not start execution %s; exec'ing it",
                    execution_id)
        from services.executors.selection import build_substrate

        substrate = build_substrate(settings, environment, github_token=github_token)
        handle = substrate.launch(execution_id)
    if substrate.name == "kubernetes":
        return _supervise_job(substrate, handle, db)
    status = SubstrateStatus.RUNNING
    try:
        while status is SubstrateStatus.RUNNING:
            status = substrate.wait(handle, WAIT_SLICE_S)
    finally:
        if status is SubstrateStatus.RUNNING:
            log.warning("worker: stopping the child of execution %s", execution_id)
            substrate.cancel(handle)
    return status


def _on_integration_origin(settings: StudioSettings, execution_id: str,
                           database: Database | None = None) -> bool:
    """Whether the execution's repository is on one of the GitHub integration's git origins:
    only then does its pod get the token (the local child filters per git operation instead)."""
    with task_database(settings, database) as db:
        row = ExecutionRepository(db).get(execution_id)
        repo_url = row.repo_url if row is not None else None
        return bool(repo_url) and IntegrationStore(db, settings).git_origins().allows(
            repo_url or "")


def _supervise_job(substrate: Substrate, handle: Handle, db: Database) -> SubstrateStatus:
    control = DbRunControl(db, handle.execution_id)
    # A Job launched for an execution already told to stop is left to run: its ``studio
    # execute`` sees the request before its first call and records the outcome (deleting it
    # again would only start the same round once more after the lease expired).
    # The kill switch does not delete the Job: its ``studio execute`` pauses the execution
    # itself before its next call (queued again, resumed once the switch is released).
    watch_for_stop = control.check() in (None, ErrorCode.KILLSWITCH_ENGAGED)
    status = SubstrateStatus.PENDING
    while not status.finished and status is not SubstrateStatus.UNKNOWN:
        stop = control.check() if watch_for_stop else None
        if stop is not None and stop is not ErrorCode.KILLSWITCH_ENGAGED:
            log.info("worker: %s: deleting job %s of execution %s", stop.value, handle.ref,
                     handle.execution_id)
            substrate.cancel(handle)
            return SubstrateStatus.FAILED
        status = substrate.wait(handle, KUBE_SLICE_S)
    return status
