"""An execution created through the API while the broker is down (issue 16, found by the chaos
test): the API used to answer ``500 internal_error`` although the execution was recorded (and
later ran, sent by a reaper), so a client retrying made a second one. Now it answers ``202``,
the execution stays queued, and once the broker is back a worker's reaper sends it and it
succeeds."""

from __future__ import annotations

from pathlib import Path

from tests.integration.api.server import api_process
from tests.integration.celery_fixtures import wait_for
from tests.integration.chaos_world import (
    CHAOS_RUNTIME,
    chaos_script,
    chaos_world,
    private_redis,
    rows,
)


def test_an_execution_created_while_the_broker_is_down_is_accepted_and_runs_later(
        tmp_path: Path) -> None:
    with private_redis(tmp_path / "redis") as (server, broker), \
            chaos_world(tmp_path, broker) as chaos, \
            api_process(chaos.env(), chaos.world.url) as api, \
            chaos.database_session() as db:
        chaos.set(**CHAOS_RUNTIME)
        server.kill()
        script, tokens = chaos_script("20161616", 0, 1)
        with api.client(api.admin) as client:
            answer = client.post("/api/executions", json={
                "repo_url": chaos.world.url, "provider": "replay", "prompt": "Fix add()",
                "pull_request": True, "replay_script": script})
            assert answer.status_code == 202, answer.text
            execution_id = answer.json()["id"]
            assert client.get(f"/api/executions/{execution_id}").json()["status"] == "queued"
        wait_for("the API to log the deferred dispatch",
                 lambda: any("recorded but not sent" in line for line in api.log), 30,
                 lambda: "".join(api.log))
        server.start()
        chaos.start_worker()
        wait_for("the execution to succeed",
                 lambda: rows(db, [execution_id])[execution_id].status == "succeeded", 240,
                 chaos.logs)
        row = rows(db, [execution_id])[execution_id]
        assert chaos.world.remote_file(row.branch or "", "chaos-ledger.txt") == f"{tokens[0]}\n"
        assert len(chaos.world.pulls_of(row.branch or "")) == 1
