"""Approval gates through ``studio api`` with no broker: the API runs each execution itself (a
``studio execute`` child of a background thread). A paused execution is left waiting (not
failed, no ``finished`` event) and a decision over HTTP runs it again in the API process; an
invalid policy is refused at creation with its stable code."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import ApiServer, running_api
from tests.integration.celery_fixtures import wait_for

# notes.txt is written (and pushed) whatever the decision: the branch exists either way, so
# the absence of gated.txt on it shows the denied command never ran (and its presence, after an
# approval, that the check would see it).
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "workspace.write_file", "args": {"path": "notes.txt",
                                                              "content": "n\n"}},
                    {"tool": "command.run",
                     "args": {"argv": ["sh", "-c", "echo ran > gated.txt"]}}]},
    {"final": {"status": "success", "summary": "gated"}}]}


def _gated_file(api: ApiServer, execution_id: str) -> str | None:
    """``gated.txt`` on the execution's pushed branch (its workspace is gone once it ended)."""
    with api.client(api.admin) as client:
        branch = client.get(f"/api/executions/{execution_id}").json()["branch"]
    assert branch and api.remote_file(branch, "notes.txt") == "n\n", branch
    return api.remote_file(branch, "gated.txt")


def _command_calls(api: ApiServer, execution_id: str) -> list[dict[str, Any]]:
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"]
    return [c for c in calls if c["domain"] == "command"]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with running_api(tmp_path_factory.mktemp("approvals-api")) as server:
        yield server


def _status(api: ApiServer, execution_id: str) -> str:
    with api.client(api.admin) as client:
        return str(client.get(f"/api/executions/{execution_id}").json()["status"])


def test_a_paused_execution_waits_and_resumes_in_the_api_process(api: ApiServer) -> None:
    execution_id = create(api, SCRIPT, approval_policy={"command.run": "require"})
    wait_for("the execution to wait", lambda: _status(api, execution_id) == "awaiting_approval",
             180, lambda: "".join(api.log[-40:]))
    assert [c["approval"]["decision"] for c in _command_calls(api, execution_id)] == ["pending"]
    with api.client(api.token("approver", ["read", "approve"])) as client:
        (approval,) = client.get(f"/api/executions/{execution_id}/approvals").json()[
            "approvals"]
        decided = client.post(f"/api/executions/{execution_id}/approvals/{approval['id']}",
                              json={"decision": "approve", "reason": "fine"})
    assert decided.status_code == 200, decided.text
    assert decided.json()["approval"]["decided_by"] == "approver"  # the token's name
    row = wait_final(api, execution_id, timeout=180)
    assert row["status"] == "succeeded", (row["error_code"], row["error_message"],
                                          "".join(api.log[-60:]))
    calls = _command_calls(api, execution_id)
    assert [(c["ok"], c["approval"]["decision"]) for c in calls] == [(True, "approve")]
    assert _gated_file(api, execution_id) == "ran\n"  # the control of the deny test's witness


@pytest.mark.parametrize("policy", [
    {"command.run": "later"}, {"shell.*": "deny"}, {"command.nope": "deny"}, ["command.run"],
    {"x" * 300: "deny"},
])
def test_an_invalid_policy_is_refused_at_creation(api: ApiServer, policy: Any) -> None:
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": SCRIPT, "approval_policy": policy}
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 422, response.text
    code = response.json()["error"]["code"]
    assert code == ("invalid_arguments" if isinstance(policy, list)
                    else "invalid_approval_policy")


def _run(api: ApiServer, run_id: str) -> dict[str, Any]:
    with api.client(api.admin) as client:
        run: dict[str, Any] = client.get(f"/api/flowchart-runs/{run_id}").json()
        return run


def test_a_flowchart_repository_node_waits_and_a_decision_over_http_resumes_its_run(
        api: ApiServer) -> None:
    gated = {"provider": "replay", "prompt": "gated", "replay_script": SCRIPT,
             "repo_url": api.repo_url, "pull_request": False,
             "approval_policy": {"command.run": "require"}}
    after = {"provider": "replay", "prompt": "after {{ nodes.fix.result.summary }}",
             "replay_script": {"turns": [{"final": {"status": "success", "summary": "after"}}]}}
    graph = {"nodes": [{"id": "start", "type": "start", "config": {}},
                       {"id": "fix", "type": "agent", "config": gated},
                       {"id": "after", "type": "agent", "config": after},
                       {"id": "end", "type": "end", "config": {}}],
             "edges": [{"id": "a", "source": "start", "target": "fix"},
                       {"id": "b", "source": "fix", "target": "after"},
                       {"id": "c", "source": "after", "target": "end"}]}
    with api.client(api.admin) as client:
        created = client.post("/api/flowcharts", json={"name": "gated", "graph": graph})
        assert created.status_code == 201, created.text
        started = client.post(f"/api/flowcharts/{created.json()['id']}/runs", json={})
        assert started.status_code == 202, started.text
    run_id = started.json()["id"]
    waiting = wait_for("the node to wait",
                       lambda: (r := _run(api, run_id))["nodes"]["fix"]["awaiting_approval"]
                       and r, 180, lambda: "".join(api.log[-40:]))
    assert waiting["status"] == "running" and waiting["nodes"]["fix"]["state"] == "running"
    assert waiting["nodes"]["after"]["state"] == "pending"
    execution_id = waiting["nodes"]["fix"]["execution_id"]
    assert _status(api, execution_id) == "awaiting_approval"
    with api.client(api.token("approver", ["read", "approve"])) as client:
        (approval,) = client.get(f"/api/executions/{execution_id}/approvals").json()[
            "approvals"]
        assert approval["requested_by"] == "all"  # the run's starter created the node's
        decided = client.post(f"/api/executions/{execution_id}/approvals/{approval['id']}",
                              json={"decision": "deny", "reason": "not here"})
    assert decided.status_code == 200 and decided.json()["resumed"] is True, decided.text
    done = wait_for("the run to end", lambda: (r := _run(api, run_id))["finished_at"] and r,
                    240, lambda: "".join(api.log[-60:]))
    assert done["status"] == "succeeded", (done, "".join(api.log[-60:]))
    assert [done["nodes"][n]["state"] for n in ("fix", "after")] == ["succeeded", "succeeded"]
    calls = _command_calls(api, execution_id)
    assert [(c["ok"], c["approval"]["decision"], c["error_code"]) for c in calls] == [
        (False, "deny", "permission_denied")]
    assert _gated_file(api, execution_id) is None  # the witness: the denied command never ran
