"""Teams through the real ``studio api`` (SQLite, then PostgreSQL): another team's objects are
404 on every route, lists show only the caller's team's, work on another team's repository is
``repository_not_in_team``; deciding an approval needs ``approve`` and not being its creator.

The walk takes every route of the OpenAPI document: a route with an object id in its path must
answer team alpha's token (every scope) with a 404 naming team beta's id, one without must not
show any of beta's ids; a route that is neither is named in :data:`TEAM_LESS` with its reason.
So a new route without the check (``services.api.teams``) fails here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import update

from services.db.evals import EvalRepository
from services.db.models import NodeExecution
from services.db.session import Database, create_db_engine
from services.db.teams import TeamStore
from services.db.triggers import TriggerStore
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, running_api
from tests.integration.celery_fixtures import wait_for
from tests.integration.databases import create_migrated_pg_database, drop_pg_database

ALL = ["read", "run", "approve", "admin"]
GATED = {"command.run": "require"}
# two gated calls, one per turn: the first decided by another token, the second by the creator
# once the setting allows it
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run", "args": {"argv": ["sh", "-c", "echo 1 > one"]}}]},
    {"tool_calls": [{"tool": "command.run", "args": {"argv": ["sh", "-c", "echo 2 > two"]}}]},
    {"final": {"status": "success", "summary": "gated twice"}}]}
QUICK: dict[str, Any] = {"turns": [{"final": {"status": "success", "summary": "quick"}}]}
GRAPH = {"nodes": [{"id": "start", "type": "start", "config": {}},
                   {"id": "end", "type": "end", "config": {}}],
         "edges": [{"id": "a", "source": "start", "target": "end"}]}
# routes without an object of a team in their path, and why they need no team check
TEAM_LESS: dict[str, str] = {
    "POST /api/executions": "creates in the caller's team (repository_not_in_team: below)",
    "POST /api/flowcharts": "creates in the caller's team",
    "POST /api/mcp-servers": "creates in the caller's team",
    "GET /api/settings/{key}": "runtime settings are the deployment's, not a team's",
    "PUT /api/settings/{key}": "deployment-wide tokens only (deployment_wide_only)",
    "DELETE /api/settings/{key}": "deployment-wide tokens only (deployment_wide_only)",
    "PUT /api/killswitch": "deployment-wide tokens only (deployment_wide_only)",
    "PUT /api/triggers/{owner}/{name}": "deployment-wide tokens only (deployment_wide_only)",
    "DELETE /api/triggers/{owner}/{name}": "deployment-wide tokens only (deployment_wide_only)",
    "POST /api/webhooks/github": "GitHub's deliveries, authenticated by their signature, not a "
                                 "token; the work goes to the repository's team",
}
# beta's trigger: a repository of its own ("name" is the MCP server's elsewhere)
TRIGGER = {"owner": "beta-org", "name": "beta-repo", "number": "1"}


@dataclass
class World:
    api: ApiServer
    alpha: str  # team alpha's token, every scope
    beta: str  # team beta's creator token, every scope
    ids: dict[str, str]  # path parameter -> beta's object
    alpha_execution: str


def _db(api: ApiServer) -> Database:
    return Database(create_db_engine(api.db_url))


def _team_token(api: ApiServer, name: str, team: str, scopes: list[str]) -> str:
    from services.db.api_tokens import ApiTokenRepository

    db = _db(api)
    try:
        token = ApiTokenRepository(db).create(name, scopes, TeamStore(db).id_of(team))[1]
    finally:
        db.dispose()
    api.tokens[name] = token
    return token


def _create(api: ApiServer, token: str, script: dict[str, Any], **extra: Any) -> Any:
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": script, **extra}
    with api.client(token) as client:
        return client.post("/api/executions", json=body)


def _status(api: ApiServer, execution_id: str) -> str:
    with api.client(api.admin) as client:
        return str(client.get(f"/api/executions/{execution_id}").json()["status"])


def _pending(api: ApiServer, execution_id: str) -> list[dict[str, Any]]:
    with api.client(api.admin) as client:
        approvals = client.get(f"/api/executions/{execution_id}/approvals").json()["approvals"]
    return [a for a in approvals if a["status"] == "pending"]


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    url = None
    if request.param == "postgres":
        url = create_migrated_pg_database(request.getfixturevalue("pg_admin"))
    try:
        with running_api(tmp_path_factory.mktemp(f"teams-{request.param}"),
                         database_url=url) as api:
            db = _db(api)
            try:
                TeamStore(db).create("alpha")
                TeamStore(db).create("beta")
            finally:
                db.dispose()
            alpha = _team_token(api, "alpha-all", "alpha", ALL)
            beta = _team_token(api, "beta-creator", "beta", ALL)
            mine = _create(api, alpha, QUICK)  # acme/widgets is nobody's yet: alpha's run
            assert mine.status_code == 202, mine.text
            db = _db(api)
            try:
                TeamStore(db).assign("acme/*", "beta")
            finally:
                db.dispose()
            created = _create(api, beta, SCRIPT, approval_policy=GATED)
            assert created.status_code == 202, created.text
            execution_id = created.json()["id"]
            wait_for("beta's execution to wait", lambda: _pending(api, execution_id), 180,
                     lambda: "".join(api.log[-40:]))
            with api.client(beta) as client:
                flowchart = client.post("/api/flowcharts", json={"name": "b", "graph": GRAPH})
                assert flowchart.status_code == 201, flowchart.text
                run = client.post(f"/api/flowcharts/{flowchart.json()['id']}/runs", json={})
                assert run.status_code == 202, run.text
                server = client.post("/api/mcp-servers", json={
                    "name": "beta-docs", "transport": "http", "url": "http://127.0.0.1:9/mcp"})
                assert server.status_code == 201, server.text
            ids = {"execution_id": execution_id,
                   "approval_id": _pending(api, execution_id)[0]["id"],
                   "flowchart_id": flowchart.json()["id"], "run_id": run.json()["id"],
                   "name": "beta-docs", **_beta_eval_and_trigger(api)}
            wait_final(api, mine.json()["id"])
            yield World(api, alpha, beta, ids, mine.json()["id"])
    finally:
        if url is not None:
            drop_pg_database(request.getfixturevalue("pg_admin"), url)


def _beta_eval_and_trigger(api: ApiServer) -> dict[str, str]:
    """An eval run (``studio eval run --team beta`` records it so) and a trigger of beta."""
    db = _db(api)
    try:
        beta = TeamStore(db).id_of("beta")
        eval_id = EvalRepository(db).create_run("beta-suite", "suite", {}, team_id=beta)
        TriggerStore(db).put("beta-org/beta-repo", repo_url=api.repo_url, command="/studio",
                             provider="replay", limits={}, enabled=True, team_id=beta)
    finally:
        db.dispose()
    return {"eval_id": eval_id, "repository": "beta-org/beta-repo"}


def _routes(api: ApiServer) -> list[tuple[str, str]]:
    with api.client() as client:
        paths = client.get("/openapi.json").json()["paths"]
    return [(method.upper(), path) for path, item in paths.items() if path.startswith("/api/")
            for method in item if method in ("get", "post", "put", "delete", "patch")]


def _concrete(path: str, ids: dict[str, str]) -> str:
    for name in [part[1:-1] for part in path.split("/") if part.startswith("{")]:
        assert name in ids, f"{path}: name the foreign object for {{{name}}} in the walk"
        path = path.replace(f"{{{name}}}", ids[name])
    return path


def _ask(api: ApiServer, token: str, method: str, path: str) -> Any:
    with api.client(token) as client:
        if method == "GET" and path.endswith("/events"):
            with client.stream("GET", path, timeout=10) as response:
                first = response.read() if response.status_code != 200 else b""
                return response.status_code, first
        return client.request(method, path, json={})


def test_every_route_hides_another_teams_objects(world: World) -> None:
    api, foreign = world.api, set(world.ids.values())
    for method, template in _routes(api):
        route = f"{method} {template}"
        if route in TEAM_LESS:
            continue
        path = _concrete(template, {**world.ids, "key": "max_iterations", **(
            TRIGGER if template.startswith("/api/triggers/") else {})})
        if "{" in template:
            answer = _ask(api, world.alpha, method, path)
            status, body = (answer[0], answer[1]) if isinstance(answer, tuple) else (
                answer.status_code, answer.content)
            assert status == 404, f"{route}: {status} {body[:300]!r}"
            error = json.loads(body)["error"]
            assert error["details"].get("id") in foreign, (route, error)
            assert error["code"] == "not_found"
            # the positive control: beta's own token is not refused so (what the walk sees)
            control = _ask(api, world.beta, method, path) if method == "GET" else None
            if control is not None and not isinstance(control, tuple):
                mine = control.json().get("error", {}).get("details", {}).get("id") \
                    if control.status_code == 404 else None
                assert mine not in foreign, (route, control.text[:300])
        else:
            assert method == "GET", f"{route}: classify it (a create? add it to TEAM_LESS)"
            answer = _ask(api, world.alpha, method, path)
            assert answer.status_code in (200, 403), (route, answer.text[:300])
            assert not any(ident in answer.text for ident in foreign), (route, answer.text)


def test_lists_show_the_teams_own_and_admins_filter(world: World) -> None:
    api = world.api
    with api.client(world.alpha) as client:
        mine = [e["id"] for e in client.get("/api/executions").json()["executions"]]
        assert mine == [world.alpha_execution]
        assert client.get("/api/flowcharts").json()["flowcharts"] == []
        assert client.get("/api/evals").json()["runs"] == []
        assert client.get("/api/triggers").json()["triggers"] == []
        other = client.get("/api/executions", params={"team": "beta"}).json()["executions"]
        assert other == []
    with api.client(api.admin) as client:  # deployment-wide: everything, or one team
        every = {e["id"] for e in client.get("/api/executions").json()["executions"]}
        assert {world.alpha_execution, world.ids["execution_id"]} <= every
        beta = [e["id"] for e in client.get("/api/executions",
                                            params={"team": "beta"}).json()["executions"]]
        assert beta == [world.ids["execution_id"]]
        evals = client.get("/api/evals", params={"team": "beta"}).json()["runs"]
        assert [r["id"] for r in evals] == [world.ids["eval_id"]]
        assert [t["repository"] for t in client.get("/api/triggers").json()["triggers"]] == [
            world.ids["repository"]]
        # a trigger stored by an operator belongs to its repository's team (acme/* is beta's)
        stored = client.put("/api/triggers/acme/widgets",
                            json={"repo_url": api.repo_url, "provider": "codex"})
        assert stored.status_code == 200, stored.text
        try:
            beta = client.get("/api/triggers", params={"team": "beta"}).json()["triggers"]
            assert {t["repository"] for t in beta} == {"acme/widgets", world.ids["repository"]}
            alpha = client.get("/api/triggers", params={"team": "alpha"}).json()["triggers"]
            assert alpha == []
        finally:
            assert client.delete("/api/triggers/acme/widgets").status_code == 204
        unknown = client.get("/api/executions", params={"team": "nobody"})
        assert unknown.status_code == 404
        hostile = client.get("/api/executions", params={"team": "<b>x</b>"})
        assert hostile.status_code == 422 and "<b>" not in hostile.text.replace("\\u003c", "")


def test_work_on_another_teams_repository_is_refused(world: World) -> None:
    api = world.api
    refused = _create(api, world.alpha, QUICK)
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "repository_not_in_team"
    with api.client(api.admin) as client:  # the witness: nothing was recorded for alpha
        alpha = client.get("/api/executions", params={"team": "alpha"}).json()["executions"]
    assert [e["id"] for e in alpha] == [world.alpha_execution]
    allowed = _create(api, world.beta, QUICK)  # the control: beta's token may
    assert allowed.status_code == 202, allowed.text
    wait_final(api, allowed.json()["id"])


def test_a_team_token_cannot_act_on_the_deployment(world: World) -> None:
    with world.api.client(world.alpha) as client:
        for method, path, body in (("PUT", "/api/killswitch", {"engaged": True}),
                                   ("PUT", "/api/settings/max_iterations", {"value": 3}),
                                   ("GET", "/api/operator/teams", None),
                                   ("GET", "/api/triggers/activity", None),
                                   ("DELETE", "/api/triggers/beta-org/beta-repo", None),
                                   ("PUT", "/api/triggers/alpha-org/repo", {
                                       "repo_url": world.api.repo_url, "provider": "replay"})):
            answer = client.request(method, path, json=body)
            assert answer.status_code == 403, answer.text
            assert answer.json()["error"]["code"] == "deployment_wide_only"
        assert client.get("/api/killswitch").json()["engaged"] is False
    with world.api.client(world.api.admin) as client:  # the witness: beta's trigger stays
        listed = client.get("/api/triggers").json()["triggers"]
        assert [t["repository"] for t in listed] == ["beta-org/beta-repo"]
        assert client.get("/api/triggers/activity").status_code == 200  # the control


def test_another_teams_dead_letter_is_not_found(world: World) -> None:
    api = world.api
    created = _create(api, world.beta, QUICK)
    assert created.status_code == 202, created.text
    execution_id = created.json()["id"]
    wait_final(api, execution_id)
    db = _db(api)
    try:  # as the retry policy leaves it after its last infrastructure error
        with db.session() as session:
            session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                            .values(status="dead_lettered", finished_at=None))
    finally:
        db.dispose()
    for action in ("retry", "discard"):
        with api.client(world.alpha) as client:
            refused = client.post(f"/api/executions/{execution_id}/{action}")
        assert refused.status_code == 404, refused.text
        assert refused.json()["error"]["details"]["id"] == execution_id
    assert _status(api, execution_id) == "dead_lettered"  # the witness: untouched
    with api.client(world.beta) as client:  # the control: beta's own admin discards it
        discarded = client.post(f"/api/executions/{execution_id}/discard")
    assert discarded.status_code == 200, discarded.text
    assert discarded.json()["status"] == "failed"


def _decide(api: ApiServer, token: str, execution_id: str, approval_id: str) -> Any:
    with api.client(token) as client:
        return client.post(f"/api/executions/{execution_id}/approvals/{approval_id}",
                           json={"decision": "approve", "reason": "ok"})


def _journal(api: ApiServer, execution_id: str) -> list[dict[str, Any]]:
    with api.client(api.admin) as client, client.stream(
            "GET", f"/api/executions/{execution_id}/events", timeout=30) as stream:
        events, kind = [], None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and kind is not None:
                events.append({"kind": kind, **json.loads(line[5:])})
                if kind == "end":
                    break
        return events


def test_approve_scope_and_the_self_approval_rule(world: World) -> None:
    api, execution_id = world.api, world.ids["execution_id"]
    approval_id = world.ids["approval_id"]
    runner = _team_token(api, "beta-runner", "beta", ["read", "run"])
    no_scope = _decide(api, runner, execution_id, approval_id)
    assert no_scope.status_code == 403 and no_scope.json()["error"]["details"] == {
        "required_scope": "approve"}
    own = _decide(api, world.beta, execution_id, approval_id)
    assert own.status_code == 403, own.text
    assert own.json()["error"]["code"] == "self_approval_refused"
    assert [a["id"] for a in _pending(api, execution_id)] == [approval_id]  # the witness
    approver = _team_token(api, "beta-approver", "beta", ["read", "approve"])
    decided = _decide(api, approver, execution_id, approval_id)  # the control
    assert decided.status_code == 200, decided.text
    assert decided.json()["approval"]["decided_by"] == "beta-approver"
    assert decided.json()["approval"]["requested_by"] == "beta-creator"
    second = wait_for("the second gated call", lambda: [
        a for a in _pending(api, execution_id) if a["id"] != approval_id], 180,
        lambda: "".join(api.log[-40:]))
    with api.client(api.admin) as client:
        assert client.put("/api/settings/approval_self_allowed",
                          json={"value": True}).status_code == 200
    try:
        mine = _decide(api, world.beta, execution_id, second[0]["id"])
        assert mine.status_code == 200, mine.text
    finally:
        with api.client(api.admin) as client:
            client.delete("/api/settings/approval_self_allowed")
    row = wait_final(api, execution_id, timeout=180)
    assert row["status"] == "succeeded", (row["error_code"], row["error_message"])
    decisions = [(e["data"]["decided_by"], e["data"]["requested_by"])
                 for e in _journal(api, execution_id) if e["kind"] == "approval_decided"]
    assert decisions == [("beta-approver", "beta-creator"), ("beta-creator", "beta-creator")]
