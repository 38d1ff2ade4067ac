"""Running executions created through the API: in a bounded thread pool of the API process.

With no broker configured the API process runs each execution itself, in the background: it
provisions a workspace (an ephemeral clone of ``repo_url``), runs :class:`ExecutionService` on it,
and removes the workspace. Whatever happens, the execution ends in a final status and its journal
ends with a ``finished`` event (written here when the loop never got to write one: a refused
URL at clone time, an unreachable host, a configuration error), so live streams always end.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from services.db.executions import FINAL_STATUSES, ExecutionRepository
from services.db.integrations import IntegrationRepository
from services.db.journal import DbEventSink
from services.db.session import Database
from services.execution.errors import ErrorCode, StudioError
from services.execution.ports import AgentEvent, AgentEventKind
from services.executions import ExecutionService, RunRequest
from services.settings import StudioSettings
from services.workspaces import Workspace, cleanup, provision_workspace

log = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 2


@dataclass(frozen=True)
class ApiRun:
    """What ``POST /api/executions`` asked for, beyond what the execution row records."""

    provider: str
    prompt: str
    repo_url: str
    model: str | None = None
    base_branch: str | None = None
    pull_request: bool = False
    script: dict[str, Any] | None = None
    limits: dict[str, Any] = field(default_factory=dict)


class Launcher(Protocol):
    def launch(self, execution_id: str, run: ApiRun) -> None: ...

    def shutdown(self) -> None: ...


class ThreadLauncher:
    """Runs executions in a pool of ``concurrency`` threads; more wait their turn (queued)."""

    def __init__(self, db: Database, settings: StudioSettings,
                 concurrency: int = DEFAULT_CONCURRENCY) -> None:
        self._db = db
        self._settings = settings
        self._pool = ThreadPoolExecutor(max_workers=concurrency,
                                        thread_name_prefix="studio-run")

    def launch(self, execution_id: str, run: ApiRun) -> None:
        future = self._pool.submit(run_execution, self._db, self._settings, execution_id, run)
        future.add_done_callback(_log_failure)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _log_failure(future: Future[None]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        log.error("background execution failed", exc_info=exc)


def run_execution(db: Database, settings: StudioSettings, execution_id: str, run: ApiRun) -> None:
    """Provision, run, clean up; the execution always ends final with a ``finished`` event."""
    workspace: Workspace | None = None
    try:
        token = IntegrationRepository(db, settings).github().token
        workspace = provision_workspace(
            execution_id, run.repo_url, base_branch=run.base_branch,
            token=token.get_secret_value() if token is not None else None,
            settings=settings, slug=run.prompt[:60],
        )
        ExecutionRepository(db).mark_running(
            execution_id, base_commit=workspace.base_commit, branch=workspace.branch,
            workspace=str(workspace.path))
        ExecutionService(db, settings).execute(execution_id, RunRequest(
            provider=run.provider, prompt=run.prompt, workspace=workspace.path, model=run.model,
            script=run.script, limit_overrides=run.limits, branch=workspace.branch,
            default_branch=workspace.base_branch, repository=run.repo_url,
            repo_url=run.repo_url))
    except StudioError as exc:
        _fail(db, execution_id, exc.code, exc.message)
    except Exception:
        _fail(db, execution_id, ErrorCode.INTERNAL_ERROR, "internal error")
        raise
    finally:
        _ensure_finished_event(db, execution_id)
        if workspace is not None:
            cleanup(workspace)


def _fail(db: Database, execution_id: str, code: ErrorCode, message: str) -> None:
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None or row.status in FINAL_STATUSES:
        return
    repository.finish(execution_id, status="failed", outcome="error", error_code=code.value,
                      error_message=message)


def _ensure_finished_event(db: Database, execution_id: str) -> None:
    """Append a ``finished`` event when the journal does not end with one."""
    repository = ExecutionRepository(db)
    row = repository.get(execution_id)
    if row is None:
        return
    last = repository.events(execution_id, after_seq=max(row.event_seq - 1, 0))
    if last and last[-1].kind == AgentEventKind.FINISHED.value:
        return
    error = ({"code": row.error_code, "message": row.error_message}
             if row.error_code else None)
    DbEventSink(db).emit(AgentEvent(
        kind=AgentEventKind.FINISHED, execution_id=execution_id, cycle=0,
        data={"status": row.status, "outcome": row.outcome, "error": error},
    ))
