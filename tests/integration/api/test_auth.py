"""Every ``/api/`` endpoint refuses a missing or bad token and a token without its scope.

Parametrized over ``app.routes`` of the real application, so an endpoint added later is covered
without touching this file; and the app factory itself refuses an ``/api/`` route without a scope.
"""

from __future__ import annotations

import re

import pytest
from fastapi import APIRouter, FastAPI

from services.api.app import UnscopedRoute, api_routes, check_scopes, create_app
from services.api.auth import Scope, requires
from services.api.dispatch import WorkDispatch
from services.db.session import Database, create_db_engine
from services.execution.errors import ErrorCode
from services.settings import StudioSettings
from tests.integration.api.server import ApiServer

ALL_SCOPES = [scope.value for scope in Scope]


class _NoLauncher:
    def launch(self, execution_id: str) -> None:
        raise AssertionError("nothing is launched while listing routes")

    def shutdown(self) -> None:
        pass


def _no_dispatch(execution_id: str) -> None:
    raise AssertionError("nothing is dispatched while listing routes")


def _routes() -> list[tuple[str, str, Scope | None]]:
    """The real app's ``/api/`` endpoints, from ``app.routes`` (included routers resolved)."""
    db = Database(create_db_engine("sqlite://"))
    app = create_app(StudioSettings(), db=db, launcher=_NoLauncher(),
                     dispatch=WorkDispatch(execution=_no_dispatch, brokered=True))
    found = api_routes(app)
    db.dispose()
    return found


API_ROUTES = _routes()
IDS = [f"{method} {path}" for method, path, _ in API_ROUTES]


def _concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "0b3e4a57-8c1d-4e0f-9a2b-3c4d5e6f7a8b", path)


def test_there_are_api_routes_and_all_declare_a_scope() -> None:
    assert len(API_ROUTES) >= 10
    assert all(scope is not None for _, _, scope in API_ROUTES)


@pytest.mark.parametrize(("method", "path", "scope"), API_ROUTES, ids=IDS)
def test_missing_and_invalid_tokens_are_unauthorized(
    api: ApiServer, method: str, path: str, scope: Scope
) -> None:
    for headers in ({}, {"Authorization": "Bearer studio_not-a-real-token"},
                    {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Bearer"}):
        with api.client() as client:
            response = client.request(method, _concrete(path), headers=headers, json={})
        assert response.status_code == 401, (headers, response.text)
        assert response.json()["error"]["code"] == ErrorCode.UNAUTHORIZED.value
        assert response.json()["ok"] is False


@pytest.mark.parametrize(("method", "path", "scope"), API_ROUTES, ids=IDS)
def test_a_token_without_the_scope_is_forbidden(
    api: ApiServer, method: str, path: str, scope: Scope
) -> None:
    others = [s for s in ALL_SCOPES if s != scope.value]
    token = api.token(f"without-{scope.value}", others)
    with api.client(token) as client:
        response = client.request(method, _concrete(path), json={})
    assert response.status_code == 403, response.text
    body = response.json()
    assert body["error"]["code"] == ErrorCode.FORBIDDEN.value
    assert body["error"]["details"] == {"required_scope": scope.value}


OK = (200, None)
NOT_FOUND = (404, ErrorCode.NOT_FOUND.value)
INVALID = (422, ErrorCode.INVALID_ARGUMENTS.value)
# What each route answers a token with only its scope, for an unknown id and the body ``{}``:
# past auth, and each answer named (a 500 or a 401/403 fails). A new route needs its row.
PAST_AUTH: dict[str, tuple[int, str | None]] = {
    "POST /api/executions": INVALID,
    "GET /api/executions": OK,
    "GET /api/executions/{execution_id}": NOT_FOUND,
    "POST /api/executions/{execution_id}/cancel": NOT_FOUND,
    "GET /api/executions/{execution_id}/tool-calls": NOT_FOUND,
    "GET /api/executions/{execution_id}/events": NOT_FOUND,
    "GET /api/executions/{execution_id}/diff": NOT_FOUND,
    "GET /api/executions/{execution_id}/replay-script": NOT_FOUND,
    "GET /api/executions/{execution_id}/output": NOT_FOUND,
    "GET /api/executions/{execution_id}/approvals": NOT_FOUND,
    # the id is checked first (a foreign or unknown one is 404 whatever the body)
    "POST /api/executions/{execution_id}/approvals/{approval_id}": NOT_FOUND,
    "GET /api/settings": OK,
    "GET /api/settings/{key}": NOT_FOUND,
    "PUT /api/settings/{key}": INVALID,
    "DELETE /api/settings/{key}": NOT_FOUND,
    "GET /api/killswitch": OK,
    "PUT /api/killswitch": INVALID,
    "GET /api/providers": OK,
    "POST /api/flowcharts": INVALID,
    "GET /api/flowcharts": OK,
    "GET /api/flowcharts/{flowchart_id}": NOT_FOUND,
    "PUT /api/flowcharts/{flowchart_id}": NOT_FOUND,
    "DELETE /api/flowcharts/{flowchart_id}": NOT_FOUND,
    "POST /api/flowcharts/{flowchart_id}/runs": NOT_FOUND,
    "GET /api/flowcharts/{flowchart_id}/runs": NOT_FOUND,
    "GET /api/flowchart-runs/{run_id}": NOT_FOUND,
    "POST /api/flowchart-runs/{run_id}/cancel": NOT_FOUND,
    "GET /api/operator/settings": OK,
    "GET /api/operator/spend": OK,
    "GET /api/operator/teams": OK,
    "POST /api/mcp-servers": INVALID,
    "GET /api/mcp-servers": OK,
    "GET /api/mcp-servers/{name}": INVALID,  # a uuid is not a server name
    "DELETE /api/mcp-servers/{name}": INVALID,
    "GET /api/triggers": OK,
    "GET /api/triggers/activity": OK,
    "PUT /api/triggers/{owner}/{name}": INVALID,
    "DELETE /api/triggers/{owner}/{name}": NOT_FOUND,
    # the trigger is checked first (a foreign or unknown one is 404 whatever the number)
    "POST /api/triggers/{owner}/{name}/pulls/{number}/follow-ups": NOT_FOUND,
    "GET /api/executions/{execution_id}/review": NOT_FOUND,
    "POST /api/executions/{execution_id}/retry": NOT_FOUND,
    "POST /api/executions/{execution_id}/discard": NOT_FOUND,
    "GET /api/evals": OK,
    "GET /api/evals/{eval_id}": NOT_FOUND,
}


@pytest.mark.parametrize(("method", "path", "scope"), API_ROUTES, ids=IDS)
def test_a_token_with_only_the_scope_gets_past_auth(
    api: ApiServer, method: str, path: str, scope: Scope
) -> None:
    route = f"{method} {path}"
    assert route in PAST_AUTH, f"name what {route} answers here in PAST_AUTH"
    token = api.token(f"only-{scope.value}", [scope.value])
    with api.client(token) as client:
        response = client.request(method, _concrete(path), json={})
    status, code = PAST_AUTH[route]
    assert response.status_code == status, response.text
    if code is not None:
        assert response.json()["error"]["code"] == code, response.text


def test_the_app_factory_refuses_an_unscoped_api_route() -> None:
    app = FastAPI()
    router = APIRouter()

    @router.get("/api/open")
    def open_route() -> dict[str, str]:
        return {}

    @router.get("/api/closed", dependencies=[requires(Scope.READ)])
    def closed_route() -> dict[str, str]:
        return {}

    app.include_router(router)
    with pytest.raises(UnscopedRoute, match="/api/open"):
        check_scopes(app)
