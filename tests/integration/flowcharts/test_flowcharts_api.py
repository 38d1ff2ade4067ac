"""Flowcharts over real HTTP against a running ``studio api``: create (422 naming the problem),
read, replace, start a run, poll it to completion, cancel, scopes."""

from __future__ import annotations

import time
import uuid
from typing import Any

from tests.integration.api.server import ApiServer
from tests.integration.flowcharts.graphs import branching

FINAL = {"succeeded", "failed", "cancelled"}


def _poll(api: ApiServer, run_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    with api.client(api.admin) as client:
        while time.monotonic() < deadline:
            run: dict[str, Any] = client.get(f"/api/flowchart-runs/{run_id}").json()
            if run["status"] in FINAL:
                return run
            time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not finish:\n" + "".join(api.log[-40:]))


def test_a_malformed_flowchart_is_refused_naming_the_problem(api: ApiServer) -> None:
    graph = branching("success")
    graph["edges"].append({"id": "stray", "source": "fix", "target": "nowhere"})
    graph["nodes"][3]["type"] = "robot"
    with api.client(api.admin) as client:
        response = client.post("/api/flowcharts", json={"name": "bad", "graph": graph})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["code"] == "invalid_arguments"
    problems = {(p["code"], p["node_id"], p["edge_id"]) for p in error["details"]["problems"]}
    assert problems == {("dangling_edge", None, "stray"), ("unknown_node_type", "ship", None)}
    assert "'stray'" in error["message"] and "'ship'" in error["message"]


def test_create_start_and_poll_a_run_to_completion(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        created = client.post("/api/flowcharts",
                              json={"name": "fix and ship", "graph": branching("success")})
        assert created.status_code == 201, created.text
        flowchart = created.json()
        assert client.get(f"/api/flowcharts/{flowchart['id']}").json()["graph"] == \
            flowchart["graph"]
        assert flowchart["id"] in [f["id"] for f in client.get("/api/flowcharts").json()
                                   ["flowcharts"]]
        started = client.post(f"/api/flowcharts/{flowchart['id']}/runs", json={})
        assert started.status_code == 202, started.text
    run = _poll(api, started.json()["id"])
    assert run["status"] == "succeeded", run
    assert run["nodes"]["retry"]["state"] == "skipped"
    assert run["nodes"]["ship"]["result"]["summary"] == "shipped"
    with api.client(api.admin) as client:
        execution = client.get(f"/api/executions/{run['nodes']['ship']['execution_id']}").json()
        assert execution["prompt"] == "Ship it: tests fixed"
        assert execution["flowchart_run_id"] == run["id"]
        cancelled = client.post(f"/api/flowchart-runs/{run['id']}/cancel")
        assert cancelled.status_code == 202 and cancelled.json()["status"] == "succeeded"


def test_replace_delete_workspace_and_scopes(api: ApiServer) -> None:
    reader = api.token("reader", ["read"])
    with api.client(api.admin) as client:
        flowchart = client.post("/api/flowcharts",
                                json={"name": "x", "graph": branching("success")}).json()
        url = f"/api/flowcharts/{flowchart['id']}"
        bad = branching("success")
        bad["edges"][1]["condition"] = "yes"  # e1: fix -> route, not from a decision
        refused = client.put(url, json={"graph": bad})
        assert refused.status_code == 422
        assert refused.json()["error"]["details"]["problems"][0]["edge_id"] == "e1"
        renamed = client.put(url, json={"name": "renamed"})
        assert renamed.status_code == 200 and renamed.json()["name"] == "renamed"
        outside = client.post(f"{url}/runs", json={"workspace": "/etc"})
        assert outside.status_code == 422
        assert outside.json()["error"]["code"] == "host_path_refused"
        assert outside.json()["error"]["details"]["field"] == "workspace"
    with api.client(reader) as client:
        assert client.get(url).status_code == 200
        assert client.post(f"{url}/runs", json={}).status_code == 403
        assert client.delete(url).status_code == 403
    with api.client(api.admin) as client:
        assert client.delete(url).status_code == 204
        assert client.get(url).status_code == 404
        assert client.get(f"/api/flowchart-runs/{uuid.uuid4()}").status_code == 404
