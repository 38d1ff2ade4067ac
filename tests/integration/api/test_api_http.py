"""The API over real HTTP against a running ``studio api``: executions, errors, settings, health."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.session import Database, create_db_engine
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode
from tests.integration.api.helpers import create, read_all, slow_script, wait_final
from tests.integration.api.server import CORS_ORIGIN, ApiServer
from tests.support import warm_cli
from tests.support.redaction import settings_redactor

ERROR_KEYS = {"code", "message", "details", "retryable", "request_id", "correlation_id"}


def assert_envelope(body: dict[str, object], code: ErrorCode) -> None:
    assert body["ok"] is False
    error = body["error"]
    assert isinstance(error, dict) and set(error) == ERROR_KEYS
    assert error["code"] == code.value
    assert error["request_id"]


def test_public_health_and_openapi(api: ApiServer) -> None:
    with api.client() as client:
        assert client.get("/healthz").json() == {"ok": True}
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["database"]["migrated"] is True
        assert ready.json()["sandbox"]["mode"] in ("bwrap", "landlock", "none")
        spec = client.get("/openapi.json").json()
        assert "/api/executions" in spec["paths"]
        assert "HTTPBearer" in spec["components"]["securitySchemes"]
        page = client.get("/")
        assert page.status_code == 200 and "/static/run_page.js" in page.text
        assert client.get("/static/run_page.js").status_code == 200
        assert client.get("/static/vendor/dagre.min.js").status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]


def test_execution_runs_in_the_background_and_records_its_tool_calls(api: ApiServer) -> None:
    execution_id = create(api, slow_script(0))
    row = wait_final(api, execution_id)
    assert row["status"] == "succeeded", row
    assert row["repo_url"] == api.repo_url and row["branch"].startswith("studio/")
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"]
        listed = client.get("/api/executions", params={"status": "succeeded"}).json()
    assert [(c["domain"], c["operation"], c["ok"]) for c in calls] == [
        ("workspace", "write_file", True), ("command", "run", True),
        ("workspace", "write_file", True), ("workspace", "read_file", False)]
    assert calls[3]["error_code"] == "path_not_found"
    assert execution_id in [e["id"] for e in listed["executions"]]
    events = read_all(api, execution_id)
    journal = events[:-1]
    assert [e.id for e in journal] == list(range(1, len(journal) + 1))
    assert events[-1].kind == "end" and events[-1].id == journal[-1].id
    assert events[-1].data["data"]["status"] == "succeeded"


@pytest.mark.parametrize("repo_url", [
    "file:///etc", "/srv/repos/widgets", "ext::sh -c touch% /tmp/pwned", "-uhttps://x/y.git",
    "--upload-pack=touch /tmp/x", "ssh://git@example.com/a/b.git", "git@example.com:a/b.git",
    "http://example.com/a/b.git", "https://user:pw@example.com/a/b.git",
])
def test_repo_urls_are_validated_as_from_the_api(api: ApiServer, repo_url: str) -> None:
    body = {"repo_url": repo_url, "provider": "replay", "prompt": "p",
            "replay_script": {"turns": [{"final": "x"}]}}
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
        listed = client.get("/api/executions", params={"limit": 500}).json()["executions"]
    assert response.status_code == 422
    assert_envelope(response.json(), ErrorCode.INVALID_ARGUMENTS)
    assert repo_url not in [e["repo_url"] for e in listed]


@pytest.mark.parametrize("body", [
    {"provider": "replay", "prompt": "p"},
    {"repo_url": "https://example.com/a.git", "provider": "nope", "prompt": "p"},
    {"repo_url": "https://example.com/a.git", "provider": "replay", "prompt": "p"},
    {"repo_url": "https://example.com/a.git", "provider": "replay", "prompt": "p",
     "replay_script": {"turns": "no"}},
    {"repo_url": "https://example.com/a.git", "provider": "codex", "prompt": "p",
     "replay_script": {"turns": []}},
    {"repo_url": "https://example.com/a.git", "provider": "codex", "prompt": "p",
     "limits": {"max_iterations": 0}},
    {"repo_url": "https://example.com/a.git", "provider": "codex", "prompt": "p", "extra": 1},
])
def test_invalid_bodies_are_invalid_arguments(api: ApiServer, body: dict[str, object]) -> None:
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 422, response.text
    assert_envelope(response.json(), ErrorCode.INVALID_ARGUMENTS)


@pytest.mark.parametrize("path", [
    "/api/executions/0b3e4a57-unknown", "/api/executions/0b3e4a57-unknown/tool-calls",
    "/api/executions/0b3e4a57-unknown/events", "/api/settings/no_such_setting",
])
def test_unknown_ids_are_not_found(api: ApiServer, path: str) -> None:
    with api.client(api.admin) as client:
        response = client.get(path, headers={"X-Request-ID": "req-42"})
    assert response.status_code == 404
    assert_envelope(response.json(), ErrorCode.NOT_FOUND)
    assert response.json()["error"]["request_id"] == "req-42"
    assert response.headers["x-request-id"] == "req-42"


@pytest.fixture(scope="module")
def one_row_per_status(api: ApiServer) -> dict[str, str]:
    """An execution recorded in each status, straight in the API's database (no API call can put
    one in every status on demand): its id by status."""
    db = Database(create_db_engine(api.db_url))
    try:
        executions = ExecutionRepository(db, settings_redactor())
        planted = {}
        for status in ExecutionStatus:
            execution_id = executions.create(provider="replay", model="replay",
                                             prompt=f"planted {status.value}")
            with db.session() as session:
                session.execute(update(NodeExecution).where(NodeExecution.id == execution_id)
                                .values(status=status.value))
            planted[status.value] = execution_id
        return planted
    finally:
        db.dispose()


@pytest.mark.parametrize("status", [s.value for s in ExecutionStatus])
def test_the_list_filters_on_every_execution_status(api: ApiServer, status: str,
                                                    one_row_per_status: dict[str, str]) -> None:
    with api.client(api.admin) as client:
        response = client.get("/api/executions", params={"status": status})
    assert response.status_code == 200, response.text
    listed = response.json()["executions"]
    assert listed, "the planted row of this status is missing"  # all() of nothing is True
    assert all(e["status"] == status for e in listed)
    ids = {e["id"] for e in listed}
    assert one_row_per_status[status] in ids
    assert ids.isdisjoint(i for s, i in one_row_per_status.items() if s != status)


def test_the_list_refuses_an_unknown_status(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        response = client.get("/api/executions", params={"status": "done"})
    assert response.status_code == 422
    assert_envelope(response.json(), ErrorCode.INVALID_ARGUMENTS)


def test_cancel_and_unknown_cancel(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        assert client.post("/api/executions/nope/cancel").status_code == 404
    execution_id = create(api, slow_script(30))
    with api.client(api.admin) as client:
        response = client.post(f"/api/executions/{execution_id}/cancel")
        assert response.status_code == 202 and response.json()["cancel_requested"] is True
    row = wait_final(api, execution_id)
    assert row["status"] == "cancelled" and row["cancel_requested"] is True


def test_settings_killswitch_and_providers(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        assert client.put("/api/settings/max_iterations", json={"value": 7}).json() == {
            "key": "max_iterations", "value": 7}
        assert client.get("/api/settings").json()["settings"]["max_iterations"] == 7
        bad = client.put("/api/settings/max_iterations", json={"value": "seven"})
        assert bad.status_code == 422
        assert_envelope(bad.json(), ErrorCode.INVALID_ARGUMENTS)
        assert client.put("/api/killswitch", json={"engaged": True}).json() == {"engaged": True}
        assert client.get("/api/settings/killswitch_engaged").json()["value"] is True
        assert client.put("/api/killswitch", json={"engaged": False}).json() == {"engaged": False}
        client.put("/api/settings/max_iterations", json={"value": 24})
        providers = client.get("/api/providers").json()["providers"]
    assert {p["provider"] for p in providers} == {"codex", "gemini", "claude", "replay"}


def test_metrics_count_executions_and_tool_calls(api: ApiServer) -> None:
    wait_final(api, create(api, slow_script(0)))
    with api.client() as client:
        response = client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    lines = response.text.splitlines()
    assert "# TYPE studio_executions_finished_total counter" in lines
    assert "# TYPE studio_tool_calls_total counter" in lines
    succeeded = [ln for ln in lines if ln.startswith('studio_executions{status="succeeded"}')]
    assert succeeded and float(succeeded[0].split()[-1]) >= 1
    assert any(ln.startswith('studio_tool_calls_total{outcome="path_not_found"}') for ln in lines)


def test_cors_allows_the_configured_origin_only(api: ApiServer) -> None:
    preflight = {"Access-Control-Request-Method": "GET",
                 "Access-Control-Request-Headers": "authorization"}
    with api.client() as client:
        allowed = client.options("/api/executions", headers={"Origin": CORS_ORIGIN, **preflight})
        other = client.options("/api/executions",
                               headers={"Origin": "http://evil.example", **preflight})
    assert allowed.headers.get("access-control-allow-origin") == CORS_ORIGIN
    assert "access-control-allow-origin" not in other.headers


def test_tokens_create_prints_the_token_alone_on_the_last_line(api: ApiServer) -> None:
    done = warm_cli.run([sys.executable, "-m", "services.cli", "tokens", "create", "--name",
                         "ci", "--scopes", "read"], env=api.env, capture_output=True,
                        text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    token = done.stdout.strip().splitlines()[-1]
    assert token.startswith("studio_") and " " not in token and token not in done.stderr
    with api.client(token) as client:
        assert client.get("/api/executions").status_code == 200
        assert client.put("/api/killswitch", json={"engaged": True}).status_code == 403


GO_FLAG = ".git/studio-api-killswitch-go"
WAITING_SCRIPT = {"turns": [
    {"tool_calls": [{"tool": "command.run", "args": {
        "argv": ["sh", "-c", f"until [ -e {GO_FLAG} ]; do sleep 0.2; done"], "timeout_s": 600}}]},
    {"tool_calls": [{"tool": "workspace.write_file",
                     "args": {"path": "after.txt", "content": "resumed\n"}}]},
    {"final": "done"},
]}
ONE_COMMAND = {"name": "one command", "graph": {
    "nodes": [{"id": "start", "type": "start", "config": {}},
              {"id": "say", "type": "command", "config": {"command": "echo hi"}},
              {"id": "end", "type": "end", "config": {}}],
    "edges": [{"id": "e0", "source": "start", "target": "say"},
              {"id": "e1", "source": "say", "target": "end"}]}}


def _poll(probe: Callable[[], Any], timeout: float = 180.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := probe()):
            return found
        time.sleep(0.1)
    raise AssertionError("condition not reached in time")


def test_the_kill_switch_pauses_a_run_refuses_new_work_and_its_release_resumes_it(
        api: ApiServer) -> None:
    """No broker: the API runs the execution itself; the release (here through the settings
    route) dispatches the paused execution again at once."""
    execution_id = create(api, WAITING_SCRIPT)
    with api.client(api.admin) as client:
        flowchart = client.post("/api/flowcharts", json=ONE_COMMAND).json()["id"]
        # the waiting command is under way (its record is made once it passed the checks)
        _poll(lambda: client.get(f"/api/executions/{execution_id}/tool-calls").json()[
            "tool_calls"])
        running = client.get(f"/api/executions/{execution_id}").json()
        assert client.put("/api/killswitch", json={"engaged": True}).json() == {"engaged": True}
        try:
            refused = client.post("/api/executions", json={
                "repo_url": api.repo_url, "provider": "replay", "prompt": "more",
                "replay_script": WAITING_SCRIPT})
            assert refused.status_code == 503
            assert_envelope(refused.json(), ErrorCode.KILLSWITCH_ENGAGED)
            assert refused.json()["error"]["retryable"] is True
            refused = client.post(f"/api/flowcharts/{flowchart}/runs", json={})
            assert refused.status_code == 503
            assert_envelope(refused.json(), ErrorCode.KILLSWITCH_ENGAGED)
            (Path(running["workspace"]) / GO_FLAG).touch()
            paused = _poll(lambda: (row := client.get(
                f"/api/executions/{execution_id}").json())["paused_reason"] and row)
            assert (paused["status"], paused["paused_reason"]) == ("queued", "killswitch")
            assert paused["error_code"] is None and paused["finished_at"] is None
        finally:
            released = client.put("/api/settings/killswitch_engaged", json={"value": False})
        assert released.json() == {"key": "killswitch_engaged", "value": False}
    row = wait_final(api, execution_id, timeout=240)
    assert row["status"] == "succeeded" and row["paused_reason"] is None
    with api.client(api.admin) as client:
        names = [c["tool_name"] for c in client.get(
            f"/api/executions/{execution_id}/tool-calls").json()["tool_calls"]]
    assert names == ["command_run", "workspace_write_file"]  # the wait ran once
