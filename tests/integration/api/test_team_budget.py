"""A team's monthly budget through the real ``studio api`` and the executions it runs (SQLite,
then PostgreSQL): a budget of $0.10 and a scripted model costing $0.04 a call.

The third call is refused (``budget_exceeded``, layer ``team``); the month crossed 50 and 80
percent once each, each alert POSTed to the team's URL signed with HMAC-SHA256 (the receiver's
first answer is a 500: the delivery is retried) and shown on the operators' page and the gauge;
two executions of one team running at once overspend by at most one call.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.db.session import Database, create_db_engine
from services.db.teams import TeamStore
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, running_api
from tests.integration.databases import create_migrated_pg_database, drop_pg_database
from tests.support.alert_receiver import AlertReceiver, alert_receiver

SECRET = "team-alert-test-secret-0123456789"
CALL_USD = 0.04
# five paid model calls, each writing a file: the budget lets two through
SCRIPT: dict[str, Any] = {"turns": [
    *({"tool_calls": [{"tool": "workspace.write_file",
                       "args": {"path": f"f{i}.txt", "content": f"{i}\n"}}],
       "usage": {"input_tokens": 10, "output_tokens": 10, "cost_usd": CALL_USD}}
      for i in range(5)),
    {"final": {"status": "success", "summary": "spent"}}]}


@dataclass
class Budgeted:
    api: ApiServer
    receiver: AlertReceiver


def _store(api: ApiServer) -> tuple[Database, TeamStore]:
    db = Database(create_db_engine(api.db_url))
    return db, TeamStore(db)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def budgeted(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Budgeted]:
    url = None
    if request.param == "postgres":
        url = create_migrated_pg_database(request.getfixturevalue("pg_admin"))
    try:
        with alert_receiver(fail_first=1) as receiver, running_api(
                tmp_path_factory.mktemp(f"budget-{request.param}"), database_url=url,
                extra_env={"STUDIO_TEAM_ALERT_SECRET": SECRET,
                           "STUDIO_TEAM_ALERT_BACKOFF_S": "0.05"}) as api:
            db, store = _store(api)
            try:
                store.create("gamma", monthly_budget_usd=0.10, notify_url=receiver.url)
                store.create("delta", monthly_budget_usd=0.10)
                store.assign("acme/*", "gamma")
            finally:
                db.dispose()
            yield Budgeted(api, receiver)
    finally:
        if url is not None:
            drop_pg_database(request.getfixturevalue("pg_admin"), url)


def _create(api: ApiServer) -> str:
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "spend",
            "replay_script": SCRIPT}
    with api.client(api.admin) as client:
        created = client.post("/api/executions", json=body)
    assert created.status_code == 202, created.text
    return str(created.json()["id"])


def _month(api: ApiServer, team: str) -> dict[str, Any]:
    with api.client(api.admin) as client:
        rows = client.get("/api/operator/teams").json()["teams"]
    (row,) = [r for r in rows if r["team"] == team]
    return dict(row)


def test_the_third_call_is_refused_and_the_alerts_are_sent_once(budgeted: Budgeted) -> None:
    api, receiver = budgeted.api, budgeted.receiver
    row = wait_final(api, _create(api), timeout=180)
    assert row["error_code"] == "budget_exceeded", (row, "".join(api.log[-40:]))
    assert "(layer: team)" in row["error_message"]
    assert row["cost_usd"] == pytest.approx(2 * CALL_USD)  # the third call was never made
    month = _month(api, "gamma")
    assert month["spent_usd"] == pytest.approx(0.08) and month["alerts"] == [50, 80]
    seen = receiver.wait_for(lambda got: sum(r.answered == 204 for r in got) >= 2)
    delivered = [json.loads(r.body) for r in seen if r.answered == 204]
    assert sorted(d["threshold"] for d in delivered) == [50, 80]  # once each
    assert len(seen) == 3 and seen[0].answered == 500  # the first answer failed: retried
    for alert in seen:
        expected = "sha256=" + hmac.new(SECRET.encode(), alert.body, hashlib.sha256).hexdigest()
        assert alert.headers["x-studio-signature"] == expected
        assert alert.headers["content-type"] == "application/json"
        assert json.loads(alert.body)["team"] == "gamma"
    assert SECRET not in "".join(api.log)
    with api.client() as client:
        metrics = client.get("/metrics").text
    assert 'studio_team_budget_spent_ratio{team="gamma"} 0.8' in metrics


def test_two_executions_at_once_overspend_by_at_most_one_call(budgeted: Budgeted) -> None:
    api = budgeted.api
    db, store = _store(api)
    try:
        store.assign("acme/*", "delta")
    finally:
        db.dispose()
    ids: list[str] = []
    threads = [threading.Thread(target=lambda: ids.append(_create(api))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    rows = [wait_final(api, execution_id, timeout=240) for execution_id in ids]
    assert [r["error_code"] for r in rows] == ["budget_exceeded"] * 2, rows
    month = _month(api, "delta")
    spent = sum(r["cost_usd"] for r in rows)
    assert month["spent_usd"] == pytest.approx(spent)  # every call was charged to the team
    assert 2 * CALL_USD - 1e-9 <= spent <= 0.10 + CALL_USD + 1e-9, rows
