"""The reaper: re-dispatch executions whose lease expired, and delete orphaned workspaces.

An execution in an active status (``claimed``, ``running``, ``finalizing``) whose
``lease_expires_at`` is in the past lost its process (a crash, a killed pod, a worker that died
mid-task). :func:`reap_expired` hands each one to a ``Dispatch`` callable (the Celery task sender
in a worker, an in-process runner in tests); the ``studio execute`` it leads to claims the lease
(bumping the epoch, which fences the old process off) and resumes. Two reapers may dispatch the
same execution: only one claim wins, the other ``studio execute`` exits doing nothing.

:func:`reap_workspaces` deletes execution directories under the workspace root whose execution is
no longer live (final, or unknown), through :func:`services.workspaces.reap_orphans`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from services.db.session import Database
from services.leases import LeaseStore
from services.settings import StudioSettings
from services.workspaces import reap_orphans, workspace_root

log = logging.getLogger(__name__)

Dispatch = Callable[[str], Any]


def reap_expired(db: Database, dispatch: Dispatch, *, limit: int = 100) -> list[str]:
    """Dispatch every execution whose lease expired; answers their ids."""
    expired = LeaseStore(db).expired(limit=limit)
    for execution_id in expired:
        log.info("reaper: the lease of %s expired; dispatching it again", execution_id)
        dispatch(execution_id)
    return expired


def reap_workspaces(db: Database, settings: StudioSettings,
                    root: Path | None = None) -> list[Path]:
    """Delete workspace directories of executions that are no longer live."""
    return reap_orphans(root or workspace_root(settings), LeaseStore(db).live())


def reap(db: Database, settings: StudioSettings, dispatch: Dispatch) -> list[str]:
    """One full pass: re-dispatch expired executions, then clean orphaned workspaces."""
    reaped = reap_expired(db, dispatch)
    reap_workspaces(db, settings)
    return reaped
