"""Approval gates end to end: the real ``studio api`` and ``studio worker`` processes on the Redis
broker, codex talking to the scripted model server (which records every request) through the
OpenAI SDK, a git host and the GitHub API double.

With ``approval_policy {"command.run": "require"}``:

1. the execution reaches ``awaiting_approval`` with one pending approval and no lease; denied
   over HTTP, the model's next request carries ``permission_denied`` and the reason, and the run
   goes on to its end (the model was not asked the paused turn again);
2. a second execution pauses, its worker is SIGKILLed while the approval is pending, another
   worker is started (one whose approvals time out after 2 s: the approval already pending keeps
   the time it was given when requested); approved over HTTP, the command runs (its file is in
   the pushed branch);
3. under that worker, a third execution's approval times out: the reaper denies it and the model
   gets ``permission_denied`` (timed out).

The scenarios share one API and run one after the other (the scripted model answers requests in
order). On failure, every worker's log and the API's log are printed in full.

Hostile decisions over HTTP (bad values, unknown and foreign approval ids, a huge reason, the
other decision after one was made, a read-only token) get their stable codes, and every
decision appears in ``studio executions show``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import (
    STUDIO,
    Broker,
    WorkerProcess,
    start_worker,
    wait_for,
)
from tests.integration.repo_env import DONE, RepoWorld, repo_world
from tests.support import warm_cli
from tests.support.model_requests import tool_results
from tests.support.model_script import text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.redaction import settings_redactor

pytestmark = pytest.mark.slow

API_KEY = "sk-approvals-PROVIDERKEY-51c2e9"
POLICY = {"command.run": "require"}
REASON = "<script>alert('no')</script> not on a Friday"


def _mark(name: str) -> dict[str, Any]:
    return {"argv": ["sh", "-c", f"echo ran > {name}"], "timeout_s": 60}


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        yield world


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _env(world: RepoWorld, tmp_path: Path, broker: Broker, model_url: str,
         **extra: str) -> dict[str, str]:
    return world.env(tmp_path / "workspaces", STUDIO_BROKER_URL=broker.url,
                     STUDIO_WORKER_QUEUE=broker.queue, OPENAI_BASE_URL=model_url + "/v1",
                     OPENAI_API_KEY=API_KEY, **extra)


def _create(api: ApiServer, prompt: str) -> str:
    body = {"repo_url": api.repo_url, "provider": "codex", "prompt": prompt,
            "pull_request": True, "approval_policy": POLICY}
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 202, response.text
    execution_id: str = response.json()["id"]
    return execution_id


def _waiting(api: ApiServer, world: RepoWorld, execution_id: str,
             workers: list[WorkerProcess]) -> dict[str, Any]:
    """Wait for ``awaiting_approval``; the one pending approval."""
    def status() -> bool:
        with api.client(api.admin) as client:
            row = client.get(f"/api/executions/{execution_id}").json()
        assert row["status"] not in ("succeeded", "failed", "cancelled", "stalled"), row
        return bool(row["status"] == "awaiting_approval")

    wait_for(f"{execution_id} to wait for an approval", status, 240,
             lambda: "\n".join(w.log() for w in workers))
    with api.client(api.admin) as client:
        approvals = client.get(f"/api/executions/{execution_id}/approvals").json()["approvals"]
    assert [(a["status"], a["tool"]) for a in approvals] == [("pending", "command.run")]
    db = world.database()
    try:
        row = ExecutionRepository(db).get(execution_id)
        assert row is not None and row.lease_owner is None  # it holds no lease while it waits
        requested = [e.data for e in ExecutionRepository(db,
                                                         settings_redactor()).events(execution_id)
                     if e.kind == "approval_requested"]
    finally:
        db.dispose()
    assert [r["approval_id"] for r in requested] == [approvals[0]["id"]]
    pending: dict[str, Any] = approvals[0]
    return pending


def _decide(api: ApiServer, execution_id: str, approval_id: str, body: dict[str, Any],
            token: str | None = None) -> Any:
    with api.client(token or api.token("reviewer", ["read", "approve"])) as client:
        return client.post(f"/api/executions/{execution_id}/approvals/{approval_id}",
                           json=body)


def _results_with(server: ScriptedModelServer, needle: str) -> list[str]:
    found = []
    for record in server.requests:
        for result in tool_results(record):
            content = json.dumps(result.content) if not isinstance(result.content, str) \
                else result.content
            if needle in content:
                found.append(content)
    return found


def _show(env: dict[str, str], execution_id: str) -> dict[str, Any]:
    """``studio executions show`` as JSON (and its text under ``"text"``), both CLI processes
    run side by side."""
    commands = {"json": [*STUDIO, "executions", "show", execution_id, "--json"],
                "text": [*STUDIO, "executions", "show", execution_id]}
    started = {name: warm_cli.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name, argv in commands.items()}
    out: dict[str, str] = {}
    for name, process in started.items():
        try:
            stdout, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        assert process.returncode == 0, stderr
        out[name] = stdout
    shown: dict[str, Any] = json.loads(out["json"].strip().splitlines()[-1])
    shown["text"] = out["text"]
    return shown


def _all_logs(workers: list[WorkerProcess], api: ApiServer | None) -> str:
    """Every worker's whole log and the API's, for a failure's report."""
    parts = [f"===== {w.log_path.name} (pid {w.pid})\n"
             + w.log_path.read_text(errors="replace") for w in workers]
    if api is not None:
        parts.append("===== studio api\n" + "".join(api.log))
    parts.append("===== processes with the database open\n" + _holders(
        api.db_url.removeprefix("sqlite:///") if api is not None else ""))
    return "\n".join(parts)


def _holders(path: str) -> str:
    """``pid ppid state argv`` of every process with ``path`` open (who may hold its lock)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or not path or not any(
                    str(fd.readlink()).startswith(path) for fd in (entry / "fd").iterdir()):
                continue
            stat = (entry / "stat").read_text()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError):
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        found.append(f"{entry.name} {fields[1]} {fields[0]} {argv[:200]}")
    return "\n".join(found)


def test_approval_gates_over_http_with_real_workers(
        world: RepoWorld, tmp_path: Path, redis_broker: Broker,
        workers: list[WorkerProcess]) -> None:
    steps = [step for name in ("denied", "approved", "late") for step in (
        tool_calls([("workspace_write_file", {"path": f"{name}-notes.txt", "content": "n\n"}),
                    ("command_run", _mark(f"{name}.txt"))]), text(json.dumps(DONE)))]
    with ScriptedModelServer(steps) as server:
        env = _env(world, tmp_path, redis_broker, server.url)
        done = warm_cli.run([*STUDIO, "settings", "set", "reaper_interval_s", "1"], env=env,
                            capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        workers.append(start_worker(env, tmp_path / "worker-a.log", "--concurrency", "1"))
        running: ApiServer | None = None
        try:
            with api_process(env, world.url) as api:
                running = api
                denied_id = _denied_run(api, world, server, env, workers)
                _hostile_decisions(api, denied_id)
                _approved_run_survives_a_killed_worker(api, world, server, env, tmp_path,
                                                       workers, denied_id)
                _timed_out_run(api, world, server, env, workers)
        except BaseException:
            print(_all_logs(workers, running))  # shown by pytest with the failure
            raise


def _denied_run(api: ApiServer, world: RepoWorld, server: ScriptedModelServer,
                env: dict[str, str], workers: list[WorkerProcess]) -> str:
    execution_id = _create(api, "Mark it denied")
    approval = _waiting(api, world, execution_id, workers)
    assert approval["args"]["argv"][-1] == "echo ran > denied.txt"
    asked = len(server.requests)
    response = _decide(api, execution_id, approval["id"],
                       {"decision": "deny", "reason": REASON})
    assert response.status_code == 200, response.text
    assert response.json()["changed"] is True and response.json()["resumed"] is True
    row = wait_final(api, execution_id, timeout=240)
    assert row["status"] == "succeeded", (row, workers[-1].log())
    # one more model request: the answer to the denied call (the turn was not asked again)
    assert len(server.requests) == asked + 1
    denials = _results_with(server, "permission_denied")
    assert len(denials) == 1 and "not on a Friday" in denials[0]
    assert world.remote_file(row["branch"], "denied.txt") is None
    assert world.remote_file(row["branch"], "denied-notes.txt") == "n\n"
    shown = _show(env, execution_id)
    gated = [c for c in shown["tool_calls"] if c["operation"] == "run"]
    assert [c["approval"]["decision"] for c in gated] == ["deny"]
    assert gated[0]["approval"]["decided_by"] == "reviewer"
    assert gated[0]["error_code"] == "permission_denied"
    assert [(a["status"], a["decided_by"], a["reason"]) for a in shown["approvals"]] == [
        ("denied", "reviewer", REASON)]
    assert "deny by reviewer" in shown["text"] and "denied" in shown["text"]
    return execution_id


def _hostile_decisions(api: ApiServer, execution_id: str) -> None:
    with api.client(api.admin) as client:
        approval_id = client.get(f"/api/executions/{execution_id}/approvals").json()[
            "approvals"][0]["id"]
    bad = _decide(api, execution_id, approval_id, {"decision": "maybe"})
    assert (bad.status_code, bad.json()["error"]["code"]) == (422, "invalid_arguments")
    extra = _decide(api, execution_id, approval_id, {"decision": "deny", "by": "someone"})
    assert extra.status_code == 422
    huge = _decide(api, execution_id, approval_id, {"decision": "deny", "reason": "x" * 5000})
    assert (huge.status_code, huge.json()["error"]["code"]) == (422, "invalid_arguments")
    unknown = _decide(api, execution_id, "no-such-approval", {"decision": "approve"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (404,
                                                                       "approval_not_found")
    again = _decide(api, execution_id, approval_id, {"decision": "deny", "reason": "again"})
    assert again.status_code == 200 and again.json()["changed"] is False
    assert again.json()["approval"]["reason"] == REASON  # the first decision stands
    other = _decide(api, execution_id, approval_id, {"decision": "approve"})
    assert (other.status_code, other.json()["error"]["code"]) == (409,
                                                                  "approval_already_decided")
    reader = _decide(api, execution_id, approval_id, {"decision": "approve"},
                     token=api.token("reader", ["read"]))
    assert (reader.status_code, reader.json()["error"]["code"]) == (403, "forbidden")
    foreign = _decide(api, "0" * 36, approval_id, {"decision": "approve"})
    assert foreign.status_code == 404


def _approved_run_survives_a_killed_worker(api: ApiServer, world: RepoWorld,
                                           server: ScriptedModelServer, env: dict[str, str],
                                           tmp_path: Path, workers: list[WorkerProcess],
                                           other_execution: str) -> None:
    execution_id = _create(api, "Mark it approved")
    approval = _waiting(api, world, execution_id, workers)
    foreign = _decide(api, other_execution, approval["id"], {"decision": "approve"})
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (404,
                                                                      "approval_not_found")
    workers[-1].kill()  # SIGKILL while the approval is pending
    with api.client(api.admin) as client:
        first = client.get("/api/executions?status=awaiting_approval").json()["executions"]
        assert [e["id"] for e in first if e["id"] == execution_id] == [execution_id]
        listed = client.get(f"/api/executions/{execution_id}/approvals").json()
    assert [a["status"] for a in listed["approvals"]] == ["pending"]  # still, after the kill
    # the next worker's approvals time out after 2 s (scenario 3); this one's was requested
    # under worker-a's default timeout and stays pending until decided
    timed_env = {**env, "STUDIO_APPROVAL_TIMEOUT_S": "2"}
    workers.append(start_worker(timed_env, tmp_path / "worker-b.log", "--concurrency", "1"))
    response = _decide(api, execution_id, approval["id"], {"decision": "approve"})
    assert response.status_code == 200 and response.json()["resumed"] is True, response.text
    row = wait_final(api, execution_id, timeout=240)
    assert row["status"] == "succeeded", (row, workers[-1].log())
    assert world.remote_file(row["branch"], "approved.txt") == "ran\n"  # the command ran
    shown = _show(env, execution_id)
    gated = [c for c in shown["tool_calls"] if c["operation"] == "run"]
    assert [(c["ok"], c["approval"]["decision"]) for c in gated] == [(True, "approve")]
    assert [a["status"] for a in shown["approvals"]] == ["approved"]
    assert "approve by reviewer" in shown["text"]


def _timed_out_run(api: ApiServer, world: RepoWorld, server: ScriptedModelServer,
                   env: dict[str, str], workers: list[WorkerProcess]) -> None:
    execution_id = _create(api, "Mark it late")
    row = wait_final(api, execution_id, timeout=300)
    assert row["status"] == "succeeded", (row, workers[-1].log())
    assert world.remote_file(row["branch"], "late.txt") is None
    late = _results_with(server, "timed out")
    assert len(late) == 1 and "permission_denied" in late[0]
    shown = _show(env, execution_id)
    assert [(a["status"], a["decided_by"]) for a in shown["approvals"]] == [
        ("denied", "timeout")]
    with api.client(api.admin) as client:
        events = client.get(f"/api/executions/{execution_id}/tool-calls").json()
    gated = [c for c in events["tool_calls"] if c["operation"] == "run"]
    assert gated[0]["approval"]["decided_by"] == "timeout"
