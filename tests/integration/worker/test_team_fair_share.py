"""Fair share through the real ``studio api`` and ``studio worker`` (two slots, Redis broker;
SQLite, then PostgreSQL), with ``team_concurrency_limit`` 1.

Both slots are busy (team a's first execution and one of the ``default`` team). Team a then
queues 19 more and team b one. When the first slot frees, a's executions behind the limit are
left waiting (``waiting_reason: team_concurrency``) and b's starts in that slot: before any of
a's queued ones and while a's first still runs (the witness: a plain queue would start a's
next one there, first in line). The order within a team is
``tests/integration/db/test_team_admission.py``'s.
"""

from __future__ import annotations

import os
import random
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.api_tokens import ApiTokenRepository
from services.db.session import Database, create_db_engine
from services.db.teams import TeamStore
from tests.integration.api.helpers import slow_script, wait_final
from tests.integration.api.server import ApiServer, running_api
from tests.integration.celery_fixtures import claimed_broker, processes_running, wait_for
from tests.integration.databases import create_migrated_pg_database, drop_pg_database

QUICK: dict[str, Any] = {"turns": [{"final": {"status": "success", "summary": "quick"}}]}


@pytest.fixture(params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApiServer]:
    url = None
    if request.param == "postgres":
        url = create_migrated_pg_database(request.getfixturevalue("pg_admin"))
    try:
        with claimed_broker() as broker, running_api(tmp_path, database_url=url,
                                                     broker=broker) as server:
            yield server
    finally:
        if url is not None:
            drop_pg_database(request.getfixturevalue("pg_admin"), url)


def _team_tokens(api: ApiServer) -> dict[str, str]:
    db = Database(create_db_engine(api.db_url))
    try:
        store, tokens = TeamStore(db), {}
        for team in ("a", "b"):
            store.create(team)
            tokens[team] = ApiTokenRepository(db).create(f"{team}-run", ["read", "run"],
                                                         store.id_of(team))[1]
        return tokens
    finally:
        db.dispose()


def _create(api: ApiServer, token: str, script: dict[str, Any]) -> str:
    with api.client(token) as client:
        created = client.post("/api/executions", json={
            "repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": script})
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


def _rows(api: ApiServer, ids: list[str]) -> list[dict[str, Any]]:
    with api.client(api.admin) as client:
        return [client.get(f"/api/executions/{i}").json() for i in ids]


def test_another_teams_execution_starts_at_the_first_free_slot(api: ApiServer) -> None:
    tokens = _team_tokens(api)
    with api.client(api.admin) as client:
        assert client.put("/api/settings/team_concurrency_limit",
                          json={"value": 1}).status_code == 200
    busy = slow_script(40)  # busy past the assertions; its sleep is told apart by a nonce
    sleep = ["sleep", "40", f"0.{random.randrange(10**8):08d}"]
    busy["turns"][1]["tool_calls"][0]["args"]["argv"] = sleep
    first = _create(api, tokens["a"], busy)
    other = _create(api, api.admin, slow_script(3))  # the default team's, in the second slot
    wait_for("both slots to be busy", lambda: all(
        r["status"] == "running" for r in _rows(api, [first, other])), 120,
        lambda: "".join(api.log[-40:]))
    queued = [_create(api, tokens["a"], QUICK) for _ in range(19)]
    late = _create(api, tokens["b"], QUICK)
    done = wait_final(api, late, timeout=120)
    assert done["status"] == "succeeded", done
    a_first, b_row, *a_rows = _rows(api, [first, late, *queued])
    assert a_first["finished_at"] is None or a_first["finished_at"] > b_row["started_at"]
    assert all(r["started_at"] is None or r["started_at"] > b_row["started_at"]
               for r in a_rows), [r["started_at"] for r in a_rows]
    waiting = [r["waiting_reason"] for r in a_rows if r["status"] == "queued"]
    assert len(waiting) == 19 and set(waiting) == {"team_concurrency"}, waiting
    for pid in processes_running(*sleep):  # else the worker's warm shutdown waits for it
        os.kill(pid, signal.SIGKILL)
