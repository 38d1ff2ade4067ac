"""Retries and the dead-letter queue end to end (issue 32): ``studio api`` and a real ``studio
worker`` on the Redis broker, codex talking to the scripted model server through the OpenAI SDK,
a git host and the GitHub API double; on SQLite and on PostgreSQL. Tiny backoff settings.

The model server's answers go through one :class:`Outage` gate: while it is down, every request
gets 503 (with ``Retry-After: 0``, so the loop's own provider retries do not wait); once up, the
scenario's next reply. One execution after the other:

1. down for the loop's three tries of two attempts, then up: queued twice with growing delays
   (from the recorded ``retry_at``), then succeeded with one push, one pull request, and no tool
   call run twice;
2. down for good: ``dead_lettered`` after ``retry_max_attempts`` attempts, every error kept;
   ``studio executions retry`` once it is up again: succeeded from its checkpoint (the edit made
   before the outage is not made again), one push, one pull request;
3. a 400 from the provider, and a repository whose host is refused (the network confinement):
   ``failed`` at once, one attempt, never retried.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import Counter, deque
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import update

from services.db.executions import ExecutionRepository
from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.runs.request import ExecutionRequest, create_execution
from services.worker.dispatch import dispatch_execution
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import STUDIO, Broker, start_worker
from tests.integration.chaos_world import postgres_url
from tests.integration.repo_env import DONE, TEST_ARGV, TOKEN, RepoWorld, repo_world
from tests.support import warm_cli
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply, error, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.settings import studio_settings

pytestmark = pytest.mark.slow

API_KEY = "sk-retries-PROVIDERKEY-7d1e0a"
TRIES = 3  # the loop's own provider tries per attempt (services.execution.guards.RetryPolicy)
MAX_ATTEMPTS = 2  # the dead-letter scenario's (runtime settings are read at each ending)
TINY = {"retry_base_s": 0.4, "retry_factor": 2.0, "retry_max_delay_s": 5.0,
        "retry_max_attempts": 3, "reaper_interval_s": 0.2}
FIX = ("workspace_edit_file", {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"})
TESTS = ("command_run", {"argv": TEST_ARGV, "timeout_s": 120})
UNAVAILABLE = error(503, headers={"Retry-After": "0"})


class Outage:
    """Every request of the model server goes through here: 503 while down (for ``count`` more
    requests, or for good), else the next planned reply (a final text once none is planned)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.replies: deque[Reply] = deque()
        self.down_for: int | None = 0  # None: down for good
        self.pending_down: int | None = 0  # the outage that starts after the next reply
        self.refused = 0

    def plan(self, *replies: Reply, down_after_first: int | None = 0) -> None:
        with self.lock:
            self.replies.extend(replies)
            self.pending_down = down_after_first

    def __call__(self, _record: RequestRecord) -> Reply:
        with self.lock:
            if self.down_for is None or self.down_for > 0:
                if self.down_for is not None:
                    self.down_for -= 1
                self.refused += 1
                return UNAVAILABLE
            reply = self.replies.popleft() if self.replies else text(json.dumps(DONE))
            if self.pending_down != 0:  # the outage starts after this reply
                self.down_for, self.pending_down = self.pending_down, 0
            return reply

    def up(self) -> None:
        with self.lock:
            self.down_for = 0


@pytest.fixture(params=["sqlite", "postgres"])
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        if request.param == "sqlite":
            yield world
            return
        with postgres_url() as url:  # a fresh database migrated to head
            yield dataclasses.replace(world, db_url=url)


def test_infrastructure_errors_are_retried_dead_lettered_and_re_driven(
        world: RepoWorld, tmp_path: Path, redis_broker: Broker) -> None:
    outage = Outage()
    with ScriptedModelServer([outage] * 400) as server:
        env = world.env(tmp_path / "workspaces", STUDIO_BROKER_URL=redis_broker.url,
                        STUDIO_WORKER_QUEUE=redis_broker.queue,
                        OPENAI_BASE_URL=server.url + "/v1", OPENAI_API_KEY=API_KEY)
        db = world.database()
        settings = SettingsRepository(db)
        for key, value in TINY.items():
            settings.set(key, value)
        worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "1")
        try:
            with api_process(env, world.url) as api:
                try:
                    _recovers(api, world, db, outage)
                    settings.set("retry_max_attempts", MAX_ATTEMPTS)
                    _dead_lettered_then_re_driven(api, world, db, outage, env)
                    _fails_at_once(api, world, db, outage)
                except BaseException:
                    print(worker.log(), "".join(api.log[-60:]))
                    raise
        finally:
            worker.stop()
            db.dispose()


def _create(api: ApiServer, prompt: str) -> str:
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json={
            "repo_url": api.repo_url, "provider": "codex", "prompt": prompt,
            "pull_request": True})
    assert response.status_code == 202, response.text
    execution_id: str = response.json()["id"]
    return execution_id


def _row(db: Database, execution_id: str) -> NodeExecution:
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None
    return row


def _delays(row: NodeExecution) -> list[float]:
    """Each retry's wait, from the recorded ``retry_at`` and the time of the failure."""
    return [(datetime.fromisoformat(e["retry_at"]) - datetime.fromisoformat(e["at"]))
            .total_seconds() for e in row.attempt_errors or [] if "retry_at" in e]


def _exactly_once(world: RepoWorld, db: Database, row: NodeExecution) -> None:
    assert row.status == "succeeded", (row.error_code, row.error_message)
    branch = row.branch or ""
    pushes = world.host.pushes_of(branch)
    assert len(pushes) == 1 and pushes[0].new == row.head_sha, pushes
    assert len(world.pulls_of(branch)) == 1
    assert "a + b" in (world.remote_file(branch, "calc.py") or "")
    journal = ExecutionRepository(db).events(row.id)
    results = [e.data["call"]["call_id"] for e in journal if e.kind == "tool_result"]
    assert len(results) == len(set(results)) == 2, results  # the edit and the tests, once each
    records = ExecutionRepository(db).tool_calls(row.id)
    assert Counter(c.operation for c in records) == Counter({"edit_file": 1, "run": 1})


def _recovers(api: ApiServer, world: RepoWorld, db: Database, outage: Outage) -> None:
    down = TRIES * 2  # two attempts fail, the third gets through
    outage.plan(tool_calls([FIX]), tool_calls([TESTS]), text(json.dumps(DONE)),
                down_after_first=down)
    refused = outage.refused
    execution_id = _create(api, "Fix add() through an outage")
    wait_final(api, execution_id, timeout=240)
    row = _row(db, execution_id)
    _exactly_once(world, db, row)
    assert outage.refused - refused == down
    errors = row.attempt_errors or []
    assert [e["code"] for e in errors] == ["provider_unavailable"] * 2
    delays = _delays(row)
    assert len(delays) == 2 and 0 < delays[0] <= delays[1], delays  # growing
    assert row.lease_epoch == 3 and row.retry_at is None


def _dead_lettered_then_re_driven(api: ApiServer, world: RepoWorld, db: Database,
                                  outage: Outage, env: dict[str, str]) -> None:
    outage.plan(tool_calls([FIX]), down_after_first=None)
    execution_id = _create(api, "Fix add() while the provider stays down")
    dead = _wait_status(db, execution_id, "dead_lettered")
    errors = dead.attempt_errors or []
    assert len(errors) == MAX_ATTEMPTS and {e["code"] for e in errors} == {"provider_unavailable"}
    assert dead.lease_owner is None and dead.pr_url is None
    assert world.host.pushes_of(dead.branch or "") == []
    listed = warm_cli.run([*STUDIO, "executions", "list", "--status", "dead_lettered",
                           "--json"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert [e["id"] for e in json.loads(listed.stdout)] == [execution_id], listed.stderr

    outage.up()
    outage.plan(tool_calls([TESTS]), text(json.dumps(DONE)))
    retried = warm_cli.run([*STUDIO, "executions", "retry", execution_id], env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout.strip().splitlines()[-1])["operator_actions"][0][
        "action"] == "retry"
    wait_final(api, execution_id, timeout=240)
    row = _row(db, execution_id)
    _exactly_once(world, db, row)  # the edit made before the outage came from the checkpoint
    actions = row.operator_actions or []
    assert [a["action"] for a in actions] == ["retry"] and actions[0]["by"].startswith("cli:")


def _wait_status(db: Database, execution_id: str, status: str) -> NodeExecution:
    from tests.integration.celery_fixtures import wait_for

    def probe() -> NodeExecution | None:
        row = _row(db, execution_id)
        assert row.status not in ("succeeded", "failed", "cancelled", "stalled"), row.status
        return row if row.status == status and row.lease_owner is None else None

    return wait_for(f"{execution_id} to be {status}", probe, 240)


def _fails_at_once(api: ApiServer, world: RepoWorld, db: Database, outage: Outage) -> None:
    outage.up()
    outage.plan(error(400, {"error": {"message": "bad request", "type": "invalid_request"}}))
    rejected = _create(api, "Fix add(), refused by the provider")
    row = wait_final(api, rejected, timeout=240)
    assert (row["status"], row["error_code"]) == ("failed", "provider_rejected")
    assert row["attempt_errors"] == [] and row["retry_at"] is None
    assert _row(db, rejected).lease_epoch == 1  # one attempt

    # recorded before the operators refused its host (the rules apply at run time too)
    refused_host = create_execution(db, ExecutionRequest(
        provider="codex", prompt="Fix add() at a host refused since", repo_url=world.url),
        Redactor([TOKEN]), settings=world.settings())
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == refused_host).values(
            repo_url="https://169.254.169.254/acme/widgets.git"))
    brokered = studio_settings(world.root / "data", database_url=world.db_url,
                               broker_url=api.env["STUDIO_BROKER_URL"],
                               worker_queue=api.env["STUDIO_WORKER_QUEUE"])
    assert dispatch_execution(refused_host, brokered) is None  # sent to the worker
    row = wait_final(api, refused_host, timeout=240)
    assert (row["status"], row["error_code"]) == ("failed", "host_not_allowed")
    assert row["attempt_errors"] == [] and _row(db, refused_host).lease_epoch == 1
