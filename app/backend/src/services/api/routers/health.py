"""Public operational endpoints: ``/healthz`` (alive), ``/readyz`` (database, sandbox),
``/metrics``."""

from __future__ import annotations

import anyio.to_thread
from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse

from services.api.deps import get_db, get_settings
from services.api.metrics import CONTENT_TYPE, exposition, trigger_snapshot
from services.api.schemas import Health, Readiness
from services.composition import sandbox_report
from services.db import migrate
from services.db.session import Database, DatabaseError
from services.db.stats import executions_by_status, oldest_waiting, tool_calls_by_outcome
from services.db.team_budget import team_spend_ratios
from services.settings import StudioSettings

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    """The process answers."""
    return Health(ok=True)


def _database_state(db: Database) -> dict[str, object]:
    try:
        db.ping()
        current = migrate.current_revisions(db.engine)
    except DatabaseError as exc:
        return {"reachable": False, "migrated": False, "error": type(exc).__name__}
    heads = migrate.head_revisions()
    return {"reachable": True, "migrated": current == heads, "current": sorted(current),
            "heads": sorted(heads)}


@router.get("/readyz", response_model=Readiness,
            responses={503: {"model": Readiness, "description": "Not ready."}})
def readyz(db: Database = Depends(get_db),  # noqa: B008
           settings: StudioSettings = Depends(get_settings)) -> JSONResponse:  # noqa: B008
    """Ready when the database is reachable and at the head migration (else 503); the command
    sandbox is reported, with a loud warning when commands would run unconfined."""
    state = _database_state(db)
    ready = bool(state["reachable"] and state["migrated"])
    body = Readiness(ok=ready, database=state, sandbox=sandbox_report(settings))
    return JSONResponse(body.model_dump(mode="json"), status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse,
            responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(db: Database = Depends(get_db)) -> PlainTextResponse:  # noqa: B008
    """Prometheus text format (see the Observability page of the docs for the families)."""
    executions = await anyio.to_thread.run_sync(executions_by_status, db)
    tool_calls = await anyio.to_thread.run_sync(tool_calls_by_outcome, db)
    triggers = await anyio.to_thread.run_sync(trigger_snapshot, db)
    teams = await anyio.to_thread.run_sync(team_spend_ratios, db)
    oldest = await anyio.to_thread.run_sync(oldest_waiting, db)
    body = await anyio.to_thread.run_sync(exposition, executions, tool_calls, triggers, teams,
                                          oldest)
    return PlainTextResponse(body, media_type=CONTENT_TYPE)
