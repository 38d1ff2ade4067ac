"""The kill switch drains and resumes (issue 16), with a real worker on Redis and PostgreSQL and
``studio api`` in front of it.

An execution created through the API reads ``calc.py``, then runs a command that waits for a
flag file in its clone's ``.git`` directory (so the kill switch is engaged, deterministically,
while a tool call is under way), then fixes ``calc.py``, runs the tests and finishes. While the
command waits the kill switch is engaged through the API; then:

* the API answers 503 ``killswitch_engaged`` (the standard error body) to a new execution and to
  a new flowchart run;
* an execution dispatched now is received by the worker and stays queued, marked paused, never
  claimed;
* the flag is set: the command completes, and the execution stops before its next model call:
  ``queued`` with ``paused_reason = killswitch``, not failed, its lease given up, no process
  left; the API, ``studio executions list`` and ``show`` say so.

Released through the API, both run to their end: succeeded, one push and one pull request each,
and no tool call of the paused execution run twice (its journal and its tool-call records).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.session import Database
from services.runs.request import ExecutionRequest, create_execution
from services.worker.dispatch import dispatch_execution
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import STUDIO, Broker, processes_running, wait_for
from tests.integration.chaos_world import Chaos, chaos_world, events, executor_processes
from tests.integration.repo_env import DONE, TEST_ARGV, TOKEN
from tests.support import warm_cli

pytestmark = pytest.mark.slow

FINAL = ("succeeded", "failed", "cancelled", "stalled")
FLAG = ".git/studio-killswitch-test-go"
# The waiting command's $0: unique to this test run, so its process can be found.
MARKER = f"studio-waits-{random.randrange(10**8):08d}"
WAIT = {"tool": "command.run", "args": {
    "argv": ["sh", "-c", f"until [ -e {FLAG} ]; do sleep 0.2; done; echo released", MARKER],
    "timeout_s": 600}}
FIX = {"tool": "workspace.edit_file",
       "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}
READ = {"tool": "workspace.read_file", "args": {"path": "calc.py"}}
TESTS = {"tool": "command.run", "args": {"argv": TEST_ARGV, "timeout_s": 120}}
PAUSED_SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [READ]}, {"tool_calls": [WAIT]}, {"tool_calls": [FIX]},
    {"tool_calls": [TESTS]}, {"final": DONE}]}
QUEUED_SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [FIX]}, {"tool_calls": [TESTS]}, {"final": DONE}]}
RUNTIME = {"lease_ttl_s": "6", "heartbeat_s": "1", "reaper_interval_s": "1",
           "queued_timeout_s": "5"}
FLOWCHART = {"name": "one command", "graph": {
    "nodes": [{"id": "start", "type": "start", "config": {}},
              {"id": "say", "type": "command", "config": {"command": "echo hi"}},
              {"id": "end", "type": "end", "config": {}}],
    "edges": [{"id": "e0", "source": "start", "target": "say"},
              {"id": "e1", "source": "say", "target": "end"}]}}


def _row(db: Database, execution_id: str) -> NodeExecution:
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    return row


def _paused(db: Database, execution_id: str) -> NodeExecution | None:
    row = _row(db, execution_id)
    return row if row.status == "queued" and row.paused_reason == "killswitch" else None


def _final(db: Database, execution_id: str) -> NodeExecution | None:
    row = _row(db, execution_id)
    return row if row.status in FINAL else None


def _records(db: Database, execution_id: str) -> list[tuple[str, str, bool | None]]:
    return [(c.call_id, c.tool_name, c.ok) for c in ExecutionRepository(db).tool_calls(
        execution_id)]


def _refused(response: Any) -> None:
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["code"] == "killswitch_engaged", body
    assert body["error"]["retryable"] is True and body["error"]["request_id"], body


def _cli(chaos: Chaos, *args: str) -> str:
    done = warm_cli.run([*STUDIO, *args], env=chaos.env(), capture_output=True, text=True,
                        timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_kill_switch_pauses_a_running_execution_and_it_resumes_exactly_once(
        tmp_path: Path, redis_broker: Broker) -> None:
    with chaos_world(tmp_path, redis_broker) as chaos:
        chaos.set(**RUNTIME)
        chaos.start_worker()
        db = chaos.database()
        try:
            with api_process(chaos.env(), chaos.world.url) as api:
                _drain_and_resume(chaos, db, api)
        finally:
            db.dispose()


def _drain_and_resume(chaos: Chaos, db: Database, api: ApiServer) -> None:
    with api.client(api.admin) as client:
        flowchart = client.post("/api/flowcharts", json=FLOWCHART)
        assert flowchart.status_code == 201, flowchart.text
        made = client.post("/api/executions", json={
            "repo_url": chaos.world.url, "provider": "replay", "prompt": "Fix add()",
            "pull_request": True, "replay_script": PAUSED_SCRIPT})
        assert made.status_code == 202, made.text
        paused_id = made.json()["id"]
        wait_for("the waiting command to run", lambda: processes_running(MARKER), 240,
                 chaos.logs)
        assert client.put("/api/killswitch", json={"engaged": True}).json() == {"engaged": True}

        # Nothing new starts: a new execution and a new flowchart run are refused.
        _refused(client.post("/api/executions", json={
            "repo_url": chaos.world.url, "provider": "replay", "prompt": "again",
            "replay_script": QUEUED_SCRIPT}))
        _refused(client.post(f"/api/flowcharts/{flowchart.json()['id']}/runs", json={}))
        assert len(ExecutionRepository(db).list(limit=10)) == 1  # nothing was recorded

        # A queued execution the worker receives now stays queued (held, never claimed).
        queued_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="Fix add() later", repo_url=chaos.world.url,
            script=QUEUED_SCRIPT, slug="later"), Redactor([TOKEN]), settings=chaos.settings())
        assert dispatch_execution(queued_id, chaos.settings()) is None  # sent to the broker
        held = wait_for("the worker to hold the queued execution",
                        lambda: _paused(db, queued_id), 240, chaos.logs)
        assert held.lease_epoch == 0 and held.started_at is None

        # The running one stops after its command, before its next model call: paused.
        before = _row(db, paused_id)
        assert before.status == "running" and before.lease_epoch == 1
        (Path(before.workspace or "") / FLAG).touch()
        paused = wait_for("the running execution to pause", lambda: _paused(db, paused_id),
                          240, chaos.logs)
        assert paused.error_code is None and paused.finished_at is None
        assert paused.lease_owner is None and paused.lease_expires_at is None
        wait_for("its studio execute to end", lambda: not executor_processes([paused_id]), 120,
                 chaos.logs)
        records = _records(db, paused_id)
        assert [name for _, name, _ in records] == ["workspace_read_file", "command_run"]
        shown = client.get(f"/api/executions/{paused_id}").json()
        assert (shown["status"], shown["paused_reason"]) == ("queued", "killswitch")
        assert shown["paused_at"] is not None
        listed = _cli(chaos, "executions", "list")
        assert f"{paused_id}" in listed and "paused: killswitch" in listed
        assert json.loads(_cli(chaos, "executions", "show", paused_id, "--json"))[
            "paused_reason"] == "killswitch"
        assert chaos.world.host.pushes_of(paused.branch or "") == []
        assert chaos.world.api.posts == 0

        # Released: both resume and finish, exactly once.
        assert client.put("/api/killswitch", json={"engaged": False}).json() == {
            "engaged": False}
        for execution_id in (paused_id, queued_id):
            wait_for(f"execution {execution_id} to finish",
                     lambda execution_id=execution_id: _final(db, execution_id), 300,
                     chaos.logs)
    _assert_resumed_once(chaos, db, paused_id, records)
    _assert_finished_once(chaos, db, queued_id)
    assert len(chaos.world.api.pulls) == 2


def _assert_finished_once(chaos: Chaos, db: Database, execution_id: str) -> NodeExecution:
    row = _row(db, execution_id)
    assert row.status == "succeeded", (row.error_code, row.error_message, chaos.logs())
    assert row.paused_reason is None
    branch = row.branch or ""
    pushes = chaos.world.host.pushes_of(branch)
    assert len(pushes) == 1 and pushes[0].new == row.head_sha, pushes
    pulls = chaos.world.pulls_of(branch)
    assert len(pulls) == 1 and (row.pr_url or "").endswith(f"/pull/{pulls[0].number}")
    assert "a + b" in (chaos.world.remote_file(branch, "calc.py") or "")
    journal = events(db, execution_id)
    assert [seq for seq, _, _ in journal] == list(range(1, len(journal) + 1))
    call_ids = [d["call"]["call_id"] for _, k, d in journal if k == "tool_call"]
    assert len(call_ids) == len(set(call_ids)), call_ids
    return row


def _assert_resumed_once(chaos: Chaos, db: Database, execution_id: str,
                         before: list[tuple[str, str, bool | None]]) -> None:
    row = _assert_finished_once(chaos, db, execution_id)
    assert row.lease_epoch == 2  # the first attempt, then the resume
    journal = events(db, execution_id)
    starts = [d for _, k, d in journal if k == "started"]
    assert [d["resumed"] for d in starts] == [False, True]
    outcomes = [d["outcome"] for _, k, d in journal if k == "finished"]
    assert outcomes == ["killswitch_engaged", "finished"]
    # No tool call repeated: the records made before the pause are the first ones, unchanged,
    # and each tool ran as often as the script asked for it.
    after = _records(db, execution_id)
    assert after[:len(before)] == before
    assert Counter(name for _, name, _ in after) == Counter({
        "workspace_read_file": 1, "command_run": 2, "workspace_edit_file": 1})
    waits = [d for _, k, d in journal if k == "tool_call" and MARKER in json.dumps(d)]
    assert len(waits) == 1


def _run_of(client: Any, run_id: str) -> dict[str, Any]:
    found: dict[str, Any] = client.get(f"/api/flowchart-runs/{run_id}").json()
    return found


def test_a_flowchart_node_paused_mid_run_continues_after_release(
        tmp_path: Path, redis_broker: Broker) -> None:
    """The agent node (a repository one) is paused mid-run: the node stays running and the run
    is not failed; released, the node task is sent again, its execution resumes, the next node
    runs and the run succeeds, with one push and one pull request."""
    graph = {"nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "fix", "type": "agent", "config": {
            "provider": "replay", "prompt": "Fix add()", "repo_url": "REPO",
            "replay_script": PAUSED_SCRIPT}},
        {"id": "after", "type": "command", "config": {"command": "echo after"}},
        {"id": "end", "type": "end", "config": {}}],
        "edges": [{"id": "e0", "source": "start", "target": "fix"},
                  {"id": "e1", "source": "fix", "target": "after"},
                  {"id": "e2", "source": "after", "target": "end"}]}
    with chaos_world(tmp_path, redis_broker) as chaos:
        chaos.set(**RUNTIME)
        chaos.start_worker()
        graph["nodes"][1]["config"]["repo_url"] = chaos.world.url  # type: ignore[index]
        db = chaos.database()
        try:
            with api_process(chaos.env(), chaos.world.url) as api, \
                    api.client(api.admin) as client:
                made = client.post("/api/flowcharts", json={"name": "fix", "graph": graph})
                assert made.status_code == 201, made.text
                started = client.post(f"/api/flowcharts/{made.json()['id']}/runs", json={})
                assert started.status_code == 202, started.text
                run_id = started.json()["id"]
                wait_for("the node's waiting command", lambda: processes_running(MARKER), 240,
                         chaos.logs)
                assert client.put("/api/killswitch", json={"engaged": True}).status_code == 200
                execution_id = _run_of(client, run_id)["nodes"]["fix"]["execution_id"]
                (Path(_row(db, execution_id).workspace or "") / FLAG).touch()
                wait_for("the node's execution to pause", lambda: _paused(db, execution_id),
                         240, chaos.logs)
                wait_for("its process to end", lambda: not executor_processes([execution_id])
                         and not processes_running(MARKER), 120, chaos.logs)
                held = _run_of(client, run_id)
                assert held["status"] == "running", held
                assert held["nodes"]["fix"]["state"] == "running"
                assert held["nodes"]["after"]["state"] in ("", "pending", None)
                assert client.put("/api/killswitch", json={"engaged": False}).status_code == 200
                done = wait_for("the run to end", lambda: (run := _run_of(client, run_id))[
                    "status"] != "running" and run, 300, chaos.logs)
            assert done["status"] == "succeeded", (done, chaos.logs())
            assert done["nodes"]["after"]["state"] == "succeeded"
            row = _assert_finished_once(chaos, db, execution_id)
            assert row.lease_epoch == 2
        finally:
            db.dispose()
