"""The reaper: re-dispatch executions whose lease expired or that were never claimed, time out
approvals (:func:`services.runs.approvals.reap_approvals`), dispatch executions whose retry is due
(:func:`services.runs.retries.dispatch_due`), and delete orphaned workspaces.

An execution in an active status (``claimed``, ``running``, ``finalizing``) whose
``lease_expires_at`` is in the past lost its process (a crash, a killed pod, a worker that died
mid-task). :func:`reap_expired` hands each one to a ``Dispatch`` callable (the Celery task sender
in a worker, an in-process runner in tests); the ``studio execute`` it leads to claims the lease
(bumping the epoch, which fences the old process off) and resumes. Two reapers may dispatch the
same execution: only one claim wins, the other ``studio execute`` exits doing nothing.

:func:`reap_unclaimed` covers what leases cannot: an execution whose message a worker took and
then died with, before any claim (queued, lease epoch 0). Once it has been queued for
``queued_timeout_s`` (a runtime setting) after its last dispatch, it is dispatched again; the
bound on how long such an execution waits is ``queued_timeout_s + reaper_interval_s``. A
duplicate delivery is harmless (admission, then the claim, let one run).

:func:`~services.runs.pauses.redispatch_paused` resumes the executions the kill switch paused
(queued, ``paused_reason = 'killswitch'``) once it is released; :func:`reap_unclaimed` leaves them
alone meanwhile.

:func:`reap_workspaces` deletes execution directories under the workspace root whose execution is
no longer live (final, or unknown), through :func:`services.repos.workspaces.reap_orphans`.

:func:`reap_retention` applies ``STUDIO_RETENTION_DAYS`` when it is set: finished executions older
than that are deleted with all they hold (:func:`services.db.retention.prune_finished`, what
``studio db prune`` runs).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.db.execution_logins import drop_expired_logins
from services.db.executions import ExecutionRepository
from services.db.leases import LeaseStore
from services.db.retention import prune_finished
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database, DatabaseError
from services.db.team_admission import due
from services.repos.workspaces import deployment_mark, reap_orphans, workspace_root
from services.runs.approvals import reap_approvals
from services.runs.endings import end_execution, finished_data, substrate_failure
from services.runs.pauses import NodeRedispatch, redispatch_paused
from services.runs.retries import dispatch_due
from services.settings import StudioSettings
from services.telemetry import record

log = logging.getLogger(__name__)

Dispatch = Callable[[str], Any]


def reap_expired(db: Database, dispatch: Dispatch, *, limit: int = 100) -> list[str]:
    """Dispatch every execution whose lease expired; answers their ids.

    An execution already sent within the last ``queued_timeout_s`` (by this reaper or another)
    is left alone: its message waits for a free worker slot, or, lost, is sent again once that
    bound has passed.

    An execution that already lost ``max_attempts`` attempts (its lease epoch, less the attempts
    that ended on purpose: kill-switch pauses and waits for an approval) is not dispatched again:
    it lost its process every time, so it is failed (and its stream ended) instead.
    """
    store = LeaseStore(db)
    settings = SettingsRepository(db)
    max_attempts = int(settings.get("max_attempts"))
    resend_after_s = float(settings.get("queued_timeout_s"))
    dispatched = []
    for execution_id in store.expired_to_resend(resend_after_s, limit=limit):
        row = ExecutionRepository(db).get(execution_id)
        if row is not None and row.lease_epoch - (row.yielded_attempts or 0) >= max_attempts:
            give_up(db, execution_id, row.lease_epoch - (row.yielded_attempts or 0))
            continue
        log.info("reaper: the lease of %s expired; dispatching it again", execution_id)
        record.reaper_dispatch("expired")
        dispatch(execution_id)
        dispatched.append(execution_id)
    return dispatched


def reap_unclaimed(db: Database, dispatch: Dispatch, *, limit: int = 100) -> list[str]:
    """Dispatch again every execution queued, unclaimed, ``queued_timeout_s`` after its last
    dispatch; answers their ids."""
    bound = float(SettingsRepository(db).get("queued_timeout_s"))
    found = LeaseStore(db).unclaimed(bound, limit=limit)
    for execution_id in found:
        log.warning("reaper: execution %s was dispatched over %.0fs ago and never claimed; "
                    "dispatching it again", execution_id, bound)
        record.reaper_dispatch("unclaimed")
        dispatch(execution_id)
    return found


def wake_waiting(db: Database, dispatch: Dispatch) -> list[str]:
    """Dispatch the executions that waited for their team's concurrency limit and now fit
    (:func:`services.db.team_admission.due`: oldest first within each team)."""
    found = due(db)
    for execution_id in found:
        log.info("execution %s: its team has a free slot; dispatching it", execution_id)
        dispatch(execution_id)
    return found


def give_up(db: Database, execution_id: str, attempts: int) -> None:
    """Fail an execution that keeps dying: take its lease (fencing any survivor), finish it."""
    store = LeaseStore(db)
    epoch = store.claim(execution_id, f"reaper-{uuid.uuid4().hex[:8]}", 60.0)
    if epoch is None:  # someone else claimed it meanwhile: theirs to finish
        return
    message = f"gave up after {attempts} attempts: each one lost its process"
    log.warning("reaper: execution %s %s", execution_id, message)
    fields = substrate_failure(message)
    end_execution(db, execution_id, {**fields, "lease_owner": None},
                  finished_data(fields, execution_id=execution_id), epoch=epoch,
                  retry=False)  # its attempts were spent already


def reap_workspaces(db: Database, settings: StudioSettings,
                    root: Path | None = None) -> list[Path]:
    """Delete workspace directories of executions that are no longer live (this deployment's
    only: another installation on the host may share the root)."""
    return reap_orphans(root or workspace_root(settings), LeaseStore(db).live,
                        mark=deployment_mark(settings))


def reap_retention(db: Database, settings: StudioSettings) -> int:
    """Delete the finished executions older than ``STUDIO_RETENTION_DAYS`` (none when unset);
    answers how many."""
    if settings.retention_days is None:
        return 0
    pruned = prune_finished(db, settings.retention_days).executions
    if pruned:
        log.info("retention: deleted %d executions finished over %d days ago", pruned,
                 settings.retention_days)
    return pruned


def reap_logins(db: Database, settings: StudioSettings) -> int:
    """Drop the per-execution database logins past their ``VALID UNTIL`` (a worker that died
    before its Job ended left them; they can no longer log in, but stay listed); how many."""
    if not settings.kube_execution_logins or db.dialect != "postgresql":
        return 0
    try:
        return drop_expired_logins(db)
    except DatabaseError as exc:  # no CREATEROLE here: the logins expire all the same
        log.warning("reaper: expired execution logins not dropped: %s", type(exc).__name__)
        return 0


def reap(db: Database, settings: StudioSettings, dispatch: Dispatch,
         dispatch_node: NodeRedispatch | None = None) -> list[str]:
    """One full pass: re-dispatch expired and unclaimed executions, those the kill switch
    paused once it is released (:func:`~services.runs.pauses.redispatch_paused`) and those whose
    approval was decided or timed out, then clean orphaned workspaces and apply the
    retention."""
    reaped = (reap_expired(db, dispatch) + reap_unclaimed(db, dispatch)
              + wake_waiting(db, dispatch)
              + redispatch_paused(db, dispatch, dispatch_node)
              + dispatch_due(db, dispatch, dispatch_node)
              + reap_approvals(db, dispatch, dispatch_node=dispatch_node,
                               resend_after_s=float(SettingsRepository(db).get(
                                   "queued_timeout_s"))))
    reap_workspaces(db, settings)
    reap_retention(db, settings)
    reap_logins(db, settings)
    return reaped
