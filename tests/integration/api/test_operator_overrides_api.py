"""A ``run`` token cannot switch a flowchart node to the legacy runtime against the operator's
setting (issue 27, finding 2): over real HTTP, a graph whose node carries
``__agent_runtime_cutover_enabled`` is refused to a ``run`` token when it is stored (create,
replace) and when it is started (a flowchart ``admin`` stored), with
``operator_override_refused`` (403) naming the node. The witness is what the attack would leave:
a node execution recorded on the ``legacy`` runtime. The control: the same calls with an
``admin`` token succeed and do leave that execution (so the witness would catch it); the
operator's ``node_overrides_allowed`` setting lets ``run`` tokens do it too."""

from __future__ import annotations

from typing import Any

import pytest

from services.execution.errors import ErrorCode
from tests.integration.api.server import ApiServer
from tests.integration.celery_fixtures import wait_for

OVERRIDE = "__agent_runtime_cutover_enabled"


def _graph(override: Any = False, node_id: str = "sneaky") -> dict[str, Any]:
    config: dict[str, Any] = {"provider": "replay", "prompt": "p",
                              "replay_script": {"turns": [{"final": "done"}]}}
    if override is not ...:
        config[OVERRIDE] = override
    return {"nodes": [{"id": "start", "type": "start", "config": {}},
                      {"id": node_id, "type": "agent", "config": config},
                      {"id": "end", "type": "end", "config": {}}],
            "edges": [{"id": "a", "source": "start", "target": node_id},
                      {"id": "b", "source": node_id, "target": "end"}]}


def _runner(api: ApiServer) -> str:
    return api.token("runner", ["read", "run"])


def _legacy_executions(api: ApiServer) -> list[dict[str, Any]]:
    """The witness: node executions recorded on the legacy runtime."""
    with api.client(api.admin) as client:
        rows = client.get("/api/executions", params={"limit": 500}).json()["executions"]
    return [r for r in rows if r["runtime"] == "legacy"]


def _refused(response: Any, node_id: str = "sneaky") -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == ErrorCode.OPERATOR_OVERRIDE_REFUSED.value
    assert node_id in error["message"] and "admin" in error["message"]
    (problem,) = error["details"]["problems"]
    assert problem["node_id"] == node_id and OVERRIDE in problem["message"]


@pytest.mark.parametrize("override", [False, True])
def test_a_run_token_cannot_store_a_node_override(api: ApiServer, override: bool) -> None:
    name = f"override {override}"
    with api.client(_runner(api)) as client:
        created = client.post("/api/flowcharts", json={"name": name, "graph": _graph(override)})
        _refused(created)
        listed = client.get("/api/flowcharts").json()["flowcharts"]
    assert name not in [f["name"] for f in listed]


def test_a_run_token_cannot_put_a_node_override_into_a_flowchart(api: ApiServer) -> None:
    with api.client(_runner(api)) as client:
        created = client.post("/api/flowcharts", json={"name": "plain",
                                                       "graph": _graph(...)})
        assert created.status_code == 201, created.text
        flowchart_id = created.json()["id"]
        replaced = client.put(f"/api/flowcharts/{flowchart_id}",
                              json={"graph": _graph(False, node_id="other")})
        _refused(replaced, "other")
        stored = client.get(f"/api/flowcharts/{flowchart_id}").json()
    assert OVERRIDE not in str(stored["graph"])


def test_a_run_token_cannot_start_an_admin_flowchart_with_an_override_admin_can(
        api: ApiServer) -> None:
    with api.client(api.admin) as client:
        created = client.post("/api/flowcharts", json={"name": "admin's", "graph": _graph()})
        assert created.status_code == 201, created.text  # the control: admin may store it
    flowchart_id = created.json()["id"]
    before = _legacy_executions(api)
    with api.client(_runner(api)) as client:
        _refused(client.post(f"/api/flowcharts/{flowchart_id}/runs", json={}))
        assert client.get(f"/api/flowcharts/{flowchart_id}/runs").json()["runs"] == []
    assert _legacy_executions(api) == before
    # the control: admin starts it and the node does run on the legacy runtime (the witness
    # sees it), chosen by the node's override against the operator's default
    with api.client(api.admin) as client:
        started = client.post(f"/api/flowcharts/{flowchart_id}/runs", json={})
        assert started.status_code == 202, started.text
    legacy = wait_for("the node's execution", lambda: [
        r for r in _legacy_executions(api) if r not in before], 180,
        lambda: "".join(api.log[-40:]))
    snapshot = legacy[0]["settings_snapshot"]["agent_runtime_cutover_enabled"]
    assert snapshot == {"value": False, "source": "node_override"}


def test_a_null_override_overrides_nothing_and_is_accepted(api: ApiServer) -> None:
    with api.client(_runner(api)) as client:
        created = client.post("/api/flowcharts", json={"name": "null", "graph": _graph(None)})
    assert created.status_code == 201, created.text


def test_an_execution_body_takes_no_operator_override(api: ApiServer) -> None:
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": {"turns": [{"final": "done"}]}, OVERRIDE: False}
    with api.client(_runner(api)) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == ErrorCode.INVALID_ARGUMENTS.value


def test_the_operator_can_allow_run_tokens_to_override(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        assert client.put("/api/settings/node_overrides_allowed",
                          json={"value": True}).status_code == 200
    try:
        with api.client(_runner(api)) as client:
            created = client.post("/api/flowcharts", json={"name": "y", "graph": _graph()})
            assert created.status_code == 201, created.text
    finally:
        with api.client(api.admin) as client:
            client.put("/api/settings/node_overrides_allowed", json={"value": False})
    with api.client(_runner(api)) as client:  # off again: refused again
        _refused(client.post(f"/api/flowcharts/{created.json()['id']}/runs", json={}))


@pytest.mark.parametrize(("key", "value", "status"), [
    (OVERRIDE, "false", 403),             # coerced to a bool by the node's config: refused
    (OVERRIDE, 0, 403),
    (OVERRIDE, "no", 403),
    (OVERRIDE, {"value": False}, 422),    # not a bool at all: the graph is invalid
    ("__AGENT_RUNTIME_CUTOVER_ENABLED", False, 422),
    ("__agent_runtime_cutover_enabled ", False, 422),
    ("agent_runtime_cutover_enabled", False, 422),
    ("__killswitch_engaged", False, 422),
])
def test_hostile_override_spellings_never_store(api: ApiServer, key: str, value: Any,
                                                status: int) -> None:
    graph = _graph(...)
    graph["nodes"][1]["config"][key] = value
    name = f"hostile {key!r} {value!r}"
    with api.client(_runner(api)) as client:
        created = client.post("/api/flowcharts", json={"name": name, "graph": graph})
        assert created.status_code == status, created.text
        listed = client.get("/api/flowcharts").json()["flowcharts"]
    assert name not in [f["name"] for f in listed]
