"""The FastAPI application factory.

Routers are registered from :data:`ROUTER_MODULES` (modules of :mod:`services.api.routers`, each
exposing ``router``): adding one is one line there. :func:`create_app` refuses to build an app
whose ``/api/`` routes do not all declare a scope (:func:`services.api.auth.requires`), so no
endpoint can be published without authentication by mistake.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import APIRouter, FastAPI
from fastapi.middleware.cors import CORSMiddleware
from fastapi.routing import iter_route_contexts
from fastapi.staticfiles import StaticFiles
from starlette.middleware.gzip import GZipMiddleware

from services.api.approval_clock import ApprovalClock
from services.api.auth import Scope, route_scope
from services.api.body_guard import BodyGuardMiddleware
from services.api.dispatch import WorkDispatch
from services.api.errors import install_error_handlers
from services.api.journal_hub import JournalHub
from services.api.launcher import DispatchLauncher, Launcher
from services.api.middleware import RequestIdMiddleware, SecurityHeadersMiddleware
from services.api.node_children import node_children
from services.api.routers.viewer import static_dir
from services.api.trigger_clock import TriggerClock
from services.db.session import Database, open_database
from services.settings import StudioSettings, get_settings
from services.telemetry.instrumentation import instrument_fastapi

ROUTER_MODULES: tuple[str, ...] = (
    "health",
    "executions",
    "events",
    "settings",
    "providers",
    "viewer",
    "flowcharts",
    "run_artifacts",
    "operators",
    "mcp_servers",
    "approvals",
    "reviews",
    "evals",
    "webhooks",
    "triggers",
    "dead_letters",
)

API_PREFIX = "/api/"
# Authenticated by their signature, not a bearer token (services.triggers.ingress).
SIGNED_PREFIX = "/api/webhooks/"


class UnscopedRoute(RuntimeError):
    """An ``/api/`` route that declares no scope."""


def _router(name: str) -> APIRouter:
    module = importlib.import_module(f"services.api.routers.{name}")
    router = getattr(module, "router", None)
    if not isinstance(router, APIRouter):
        raise TypeError(f"services.api.routers.{name} has no APIRouter named `router`")
    return router


def api_routes(app: FastAPI) -> list[tuple[str, str, Scope | None]]:
    """``(method, path, scope)`` of every ``/api/`` endpoint, included routers resolved."""
    found = []
    for context in iter_route_contexts(app.routes):
        path, dependant = context.path, getattr(context, "dependant", None)
        if (path is None or dependant is None or not path.startswith(API_PREFIX)
                or path.startswith(SIGNED_PREFIX)):
            continue
        scope = route_scope(dependant)
        found += [(method, path, scope) for method in sorted(context.methods or ())]
    return found


def check_scopes(app: FastAPI) -> None:
    """Raise :class:`UnscopedRoute` for an ``/api/`` route without a scope."""
    for method, path, scope in api_routes(app):
        if scope is None:
            raise UnscopedRoute(f"{method} {path} declares no scope")


def create_app(settings: StudioSettings | None = None, *, dispatch: WorkDispatch,
               db: Database | None = None, launcher: Launcher | None = None) -> FastAPI:
    """The API over ``db`` (default: the configured database, opened and checked here).

    ``dispatch`` is where recorded work goes (the worker's dispatcher, injected by the caller).
    """
    settings = settings or get_settings()
    database = db or open_database(settings)
    runner = launcher or DispatchLauncher(database, dispatch)
    clock = ApprovalClock(database, runner.launch, dispatch.flowchart_nodes or (
        lambda run_id, node_id: node_children(database, settings).dispatch(run_id, node_id)))
    if isinstance(runner, DispatchLauncher):
        runner.after_run = clock.poke  # an execution it ran may now wait for an approval
    # without a broker no worker's reaper runs the triggers' pass: the API does
    triggers = None if dispatch.brokered else TriggerClock(database, settings, runner.launch)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        clock.start()  # approvals expire without a reaper (services.api.approval_clock)
        if triggers is not None:
            triggers.start()
        try:
            yield
        finally:
            clock.stop()
            if triggers is not None:
                triggers.stop()
            runner.shutdown()
            if db is None:
                database.dispose()

    app = FastAPI(title="Studio backend", version="0.1.0", lifespan=lifespan,
                  docs_url=None, redoc_url=None, openapi_url="/openapi.json",
                  description="Runs of coding agents on repositories: executions, their tool "
                              "calls and live events, settings, the kill switch, providers.")
    app.state.db, app.state.settings, app.state.launcher = database, settings, runner
    app.state.dispatch = dispatch
    app.state.approval_clock = clock
    app.state.journal_hub = JournalHub(database)
    install_error_handlers(app)
    for name in ROUTER_MODULES:
        app.include_router(_router(name))
    app.mount("/static", StaticFiles(directory=static_dir()), name="static")
    app.add_middleware(BodyGuardMiddleware, max_body_bytes=settings.api_max_body_bytes)
    # pages, scripts and JSON compressed for clients that accept gzip (the event stream is not:
    # Starlette leaves text/event-stream alone, so each event still arrives as it is sent)
    app.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=6)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins,
                           allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
                           allow_headers=["Authorization", "Content-Type", "Last-Event-ID",
                                          "X-Request-ID", "X-Correlation-ID"],
                           expose_headers=["X-Request-ID", "X-Correlation-ID"])
    app.add_middleware(RequestIdMiddleware)
    app.add_middleware(SecurityHeadersMiddleware)
    instrument_fastapi(app)
    check_scopes(app)
    return app
