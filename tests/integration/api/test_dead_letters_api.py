"""The dead-letter queue over HTTP and the backlog alerts (F8), against a running ``studio api``
with no worker.

* ``GET /api/executions?status=dead_lettered`` lists the dead-lettered executions; ``retry``
  and ``discard`` need the ``admin`` scope, record the token's name and the time, answer 409
  ``not_dead_lettered`` for anything else, 404 for an unknown id, 422 for a malformed one.
* With no worker taking anything, the scraped ``studio_oldest_waiting_seconds{state="queued"}``
  grows, and the chart's PrometheusRule expressions (rendered by Helm's own engine) fire on the
  scraped samples once the oldest queued execution is older than the threshold, and once an
  execution is dead-lettered; not before (the witness). promtool is not packaged for this
  environment's Python, so the expressions (``max(metric{label="value"}) > N``) are evaluated
  here, on the parsed exposition.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import update

from services.db.base import utcnow
from services.db.models import NodeExecution
from services.db.session import Database, create_db_engine
from tests.integration.api.server import ApiServer
from tests.integration.db.helpers import new_execution
from tests.unit.helm.chart import render

MISSING = "00000000-0000-4000-8000-000000000000"


@pytest.fixture
def db(api: ApiServer) -> Iterator[Database]:
    database = Database(create_db_engine(api.db_url))
    try:
        yield database
    finally:
        database.dispose()


def _dead_lettered(db: Database) -> str:
    execution_id = new_execution(db)
    errors = [{"attempt": n, "code": "provider_unavailable", "kind": "infrastructure",
               "message": "<script>x</script> 503", "at": utcnow().isoformat()}
              for n in (1, 2, 3)]
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == execution_id).values(
            status="dead_lettered", last_error=errors[-1], attempt_errors=errors,
            error_code="provider_unavailable", error_message="503"))
    return execution_id


def test_the_dead_letter_queue_over_http(api: ApiServer, db: Database) -> None:
    dead, other = _dead_lettered(db), new_execution(db)
    with api.client(api.admin) as client:
        listed = client.get("/api/executions", params={"status": "dead_lettered"}).json()
        assert dead in [e["id"] for e in listed["executions"]]
        assert {e["status"] for e in listed["executions"]} == {"dead_lettered"}
        shown = next(e for e in listed["executions"] if e["id"] == dead)
        assert len(shown["attempt_errors"]) == 3 and shown["last_error"]["attempt"] == 3
        assert client.get("/api/executions", params={"status": "dead"}).status_code == 422
        for action in ("retry", "discard"):
            refused = client.post(f"/api/executions/{other}/{action}")
            assert (refused.status_code, refused.json()["error"]["code"]) == (
                409, "not_dead_lettered")
            missing = client.post(f"/api/executions/{MISSING}/{action}")
            assert (missing.status_code, missing.json()["error"]["code"]) == (404, "not_found")
            assert client.post(f"/api/executions/..%2f..%2fx/{action}").status_code in (404, 422)
    for scopes in (["read"], ["read", "run"]):
        with api.client(api.token("-".join(scopes), scopes)) as client:
            forbidden = client.post(f"/api/executions/{dead}/retry")
            assert (forbidden.status_code, forbidden.json()["error"]["code"]) == (
                403, "forbidden")
    with api.client() as client:
        assert client.post(f"/api/executions/{dead}/discard").status_code == 401
    with api.client(api.token("<b>ops</b>", ["read", "admin"])) as client:
        discarded = client.post(f"/api/executions/{dead}/discard")
        assert discarded.status_code == 200, discarded.text
        body = discarded.json()
        assert (body["status"], body["error_code"]) == ("failed", "dead_lettered")
        assert [(a["action"], a["by"]) for a in body["operator_actions"]] == [
            ("discard", "<b>ops</b>")]
        again = client.post(f"/api/executions/{dead}/retry")
        assert again.status_code == 409  # discarded: no longer in the queue
    assert db_status(db, other) == "queued"


def test_a_retry_over_http_queues_it_again_and_records_who(api: ApiServer, db: Database) -> None:
    dead = _dead_lettered(db)
    with api.client(api.admin) as client:
        retried = client.post(f"/api/executions/{dead}/retry")
    assert retried.status_code == 200, retried.text
    body = retried.json()
    assert body["status"] != "dead_lettered"
    assert [(a["action"], a["by"]) for a in body["operator_actions"]] == [("retry", "all")]
    assert body["attempt_errors"][-1]["redriven"] is True


def db_status(db: Database, execution_id: str) -> str:
    with db.read_session() as session:
        row = session.get(NodeExecution, execution_id)
        assert row is not None
        return row.status


# -- backlog alerts ---------------------------------------------------------------------------
_RULE = re.compile(r'^max\((\w+)(?:\{(\w+)="(\w+)"\})?\) > (\d+)$')


def _alerts(values: dict[str, Any] | None = None) -> dict[str, str]:
    settings = {"enabled": True, **(values or {})}
    objects = render({"observability": {"metrics": {"alerts": settings}}})
    rules = [o for o in objects if o["kind"] == "PrometheusRule"]
    assert len(rules) == 1
    return {rule["alert"]: rule["expr"] for group in rules[0]["spec"]["groups"]
            for rule in group["rules"]}


def _samples(api: ApiServer) -> list[tuple[str, dict[str, str], float]]:
    with api.client() as client:
        text = client.get("/metrics").text
    return [(s.name, s.labels, s.value) for family in text_string_to_metric_families(text)
            for s in family.samples]


def fires(expr: str, samples: list[tuple[str, dict[str, str], float]]) -> bool:
    """Evaluate ``max(metric{label="value"}) > N`` (the chart's form) on scraped samples."""
    match = _RULE.match(expr)
    assert match is not None, expr
    name, label, value, threshold = match.groups()
    picked = [v for n, labels, v in samples
              if n == name and (label is None or labels.get(label) == value)]
    return bool(picked) and max(picked) > float(threshold)


def _oldest_queued(samples: list[tuple[str, dict[str, str], float]]) -> float:
    return next(v for n, labels, v in samples
                if n == "studio_oldest_waiting_seconds" and labels.get("state") == "queued")


def test_without_workers_the_oldest_queued_gauge_grows_and_the_alerts_fire(
        api: ApiServer, db: Database) -> None:
    alerts = _alerts()
    assert alerts == {
        "StudioOldestQueuedExecution":
            'max(studio_oldest_waiting_seconds{state="queued"}) > 300',
        "StudioDeadLetteredExecutions": "max(studio_dead_letter_depth) > 0"}
    with db.session() as session:  # what the other tests left: out of the backlog
        session.execute(update(NodeExecution).where(NodeExecution.status.in_(
            ["queued", "dead_lettered"])).values(status="cancelled"))
    quiet = _samples(api)
    assert not fires(alerts["StudioOldestQueuedExecution"], quiet)
    assert not fires(alerts["StudioDeadLetteredExecutions"], quiet)

    new_execution(db)  # nobody takes it
    first = _oldest_queued(_samples(api))
    time.sleep(0.3)
    second = _oldest_queued(_samples(api))
    assert 0 < first < second < 300
    assert not fires(alerts["StudioOldestQueuedExecution"], _samples(api))
    with db.session() as session:  # as if it had waited ten minutes
        session.execute(update(NodeExecution).where(NodeExecution.status == "queued")
                        .values(created_at=utcnow() - timedelta(minutes=10)))
    late = _samples(api)
    assert _oldest_queued(late) >= 600
    assert fires(alerts["StudioOldestQueuedExecution"], late)
    assert not fires(_alerts({"oldestQueuedSeconds": 900})["StudioOldestQueuedExecution"], late)

    _dead_lettered(db)
    depth = _samples(api)
    assert ("studio_dead_letter_depth", {}, 1.0) in depth
    assert fires(alerts["StudioDeadLetteredExecutions"], depth)


def test_the_rule_is_off_by_default() -> None:
    assert not [o for o in render(None) if o["kind"] == "PrometheusRule"]
