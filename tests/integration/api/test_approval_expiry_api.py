"""Approvals expire through ``studio api`` with no broker and no worker, so no reaper anywhere
(issue 27, finding 8): over real HTTP, a decision after ``expires_at`` is ``approval_expired``
(409) and the gated call never runs; an execution (or a flowchart node) nobody decides for ends
at its approval's expiry with the call denied as timed out, instead of waiting forever. The
witness is the gated call's record (``ok``, its error and the decision on it); the control, a
call approved in time running, is ``test_approvals_api.py``'s first test, on the same code."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from services.execution.errors import ErrorCode
from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import REPO, ApiServer, api_process, studio_env
from tests.integration.celery_fixtures import wait_for
from tests.support.git_http_server import git_http_server, seed_bare_repo

TIMEOUT_S = "2"
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run",
                     "args": {"argv": ["sh", "-c", "echo ran > gated.txt"]}}]},
    {"final": {"status": "success", "summary": "gated"}}]}
POLICY = {"command.run": "require"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    root = tmp_path_factory.mktemp("approval-expiry")
    with git_http_server(root / "git-host", "ghs_ExpiryTestToken0123456789abcdefABCD") as host:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        env = studio_env(root, host.base_url)
        env["STUDIO_GITHUB_TOKEN"] = "ghs_ExpiryTestToken0123456789abcdefABCD"
        env["STUDIO_APPROVAL_TIMEOUT_S"] = TIMEOUT_S
        with api_process(env, host.url(REPO)) as server:
            yield server


def _approval(api: ApiServer, execution_id: str) -> dict[str, Any]:
    def asked() -> dict[str, Any] | None:
        with api.client(api.admin) as client:
            found = client.get(f"/api/executions/{execution_id}/approvals").json()["approvals"]
        return found[0] if found else None
    return wait_for("the approval to be asked", asked, 180, lambda: "".join(api.log[-40:]))


def _wait_past(expires_at: str) -> None:
    """Until the approval's expiry has passed (a condition, polled)."""
    moment = datetime.fromisoformat(expires_at)
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    while datetime.now(UTC) <= moment:
        time.sleep(0.1)


def _gated(api: ApiServer, execution_id: str) -> list[tuple[Any, ...]]:
    """The witness: what the gated call did, as recorded."""
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"]
    return [(c["ok"], c["error_code"], c["approval"]["decision"], c["approval"]["decided_by"])
            for c in calls]


def test_a_decision_after_expiry_is_refused_and_the_call_never_runs(api: ApiServer) -> None:
    execution_id = create(api, SCRIPT, approval_policy=POLICY)
    approval = _approval(api, execution_id)
    _wait_past(approval["expires_at"])
    with api.client(api.token("approver", ["read", "approve"])) as client:
        late = client.post(f"/api/executions/{execution_id}/approvals/{approval['id']}",
                           json={"decision": "approve", "reason": "late"})
    assert late.status_code == 409, late.text
    error = late.json()["error"]
    assert error["code"] == ErrorCode.APPROVAL_EXPIRED.value
    assert error["details"]["decided_by"] == "timeout"
    row = wait_final(api, execution_id, timeout=180)
    assert row["status"] == "succeeded", (row["error_code"], "".join(api.log[-40:]))
    assert _gated(api, execution_id) == [(False, "permission_denied", "deny", "timeout")]


def test_an_undecided_execution_ends_at_its_expiry_without_a_reaper(api: ApiServer) -> None:
    execution_id = create(api, SCRIPT, approval_policy=POLICY)
    row = wait_final(api, execution_id, timeout=180)  # old code: awaiting_approval forever
    assert row["status"] == "succeeded", (row["error_code"], "".join(api.log[-40:]))
    assert _gated(api, execution_id) == [(False, "permission_denied", "deny", "timeout")]
    with api.client(api.admin) as client:
        (approval,) = client.get(f"/api/executions/{execution_id}/approvals").json()[
            "approvals"]
    assert (approval["status"], approval["decided_by"]) == ("denied", "timeout")


def test_an_undecided_flowchart_node_ends_at_its_expiry_and_its_run_goes_on(
        api: ApiServer) -> None:
    gated = {"provider": "replay", "prompt": "gated", "replay_script": SCRIPT,
             "repo_url": api.repo_url, "pull_request": False, "approval_policy": POLICY}
    graph = {"nodes": [{"id": "start", "type": "start", "config": {}},
                       {"id": "fix", "type": "agent", "config": gated},
                       {"id": "end", "type": "end", "config": {}}],
             "edges": [{"id": "a", "source": "start", "target": "fix"},
                       {"id": "b", "source": "fix", "target": "end"}]}
    with api.client(api.admin) as client:
        created = client.post("/api/flowcharts", json={"name": "expiring", "graph": graph})
        assert created.status_code == 201, created.text
        started = client.post(f"/api/flowcharts/{created.json()['id']}/runs", json={})
        assert started.status_code == 202, started.text

    def ended() -> dict[str, Any] | None:
        with api.client(api.admin) as client:
            run: dict[str, Any] = client.get(
                f"/api/flowchart-runs/{started.json()['id']}").json()
        return run if run["finished_at"] else None
    done = wait_for("the run to end", ended, 240, lambda: "".join(api.log[-60:]))
    assert done["status"] == "succeeded", (done, "".join(api.log[-60:]))
    execution_id = done["nodes"]["fix"]["execution_id"]
    assert _gated(api, execution_id) == [(False, "permission_denied", "deny", "timeout")]
