"""Migration 0014 on a database of the previous release (revision 0013) with rows and tokens
(SQLite, then PostgreSQL): nothing is lost, every row moves to the ``default`` team, the old
token stays deployment-wide with its scopes, and the real ``studio api`` on that database serves
the old executions to the old token and runs a new one with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from services.db import migrate
from services.db.api_tokens import ApiTokenRepository
from services.db.flowcharts import FlowchartRepository
from services.db.models import (
    ExecutionEvent,
    Flowchart,
    FlowchartRun,
    NodeExecution,
    Team,
)
from services.db.session import Database, create_db_engine
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import running_api
from tests.integration.db.helpers import new_execution

TABLES = ("node_executions", "execution_events", "flowcharts", "flowchart_runs", "api_tokens")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'release.db'}"
    else:
        yield request.getfixturevalue("fresh_pg_url")


def _counts(db: Database) -> dict[str, int]:
    with db.engine.connect() as connection:
        return {t: int(connection.execute(text(f"SELECT count(*) FROM {t}")).scalar_one())
                for t in TABLES}


def _previous_release(url: str) -> tuple[str, list[str]]:
    """A database at 0013 holding a token, executions with a journal, a flowchart and a run:
    written at head, then taken down to 0013 (0014's downgrade drops only what it added)."""
    db = Database(create_db_engine(url))
    try:
        migrate.upgrade(db.engine)
        _, token = ApiTokenRepository(db).create("ci-pipeline", ["read", "run"])
        ids = [new_execution(db, repo_url=f"https://git.example/acme/r{i}") for i in range(2)]
        flowchart = FlowchartRepository(db).create(name="f", graph={"nodes": [], "edges": []})
        with db.session() as session:
            session.add(ExecutionEvent(execution_id=ids[0], seq=1, kind="started", data={}))
            session.add(FlowchartRun(flowchart_id=flowchart, status="succeeded", inputs={},
                                     graph={}))
        migrate.downgrade(db.engine, "0013")
        assert migrate.current_revisions(db.engine) == {"0013"}
        return token, ids
    finally:
        db.dispose()


def test_the_upgrade_keeps_every_row_and_token(url: str, tmp_path: Path) -> None:
    token, ids = _previous_release(url)
    db = Database(create_db_engine(url))
    try:
        before = _counts(db)
        assert before == {"node_executions": 2, "execution_events": 1, "flowcharts": 1,
                          "flowchart_runs": 1, "api_tokens": 1}
        migrate.upgrade(db.engine)
        assert _counts(db) == before  # the witness of a loss (a copied table's cascade)
        with db.read_session() as session:
            (default,) = session.execute(select(Team.id, Team.name)).all()
            assert default.name == "default"
            for model in (NodeExecution, Flowchart, FlowchartRun):
                teams = set(session.scalars(select(model.team_id)))
                assert teams == {default.id}, model
            assert session.scalar(select(func.count()).select_from(ExecutionEvent)) == 1
        identity = ApiTokenRepository(db).verify(token)
        assert identity is not None and identity.team_id is None  # deployment-wide
        assert identity.scopes == frozenset({"read", "run"})
    finally:
        db.dispose()
    with running_api(tmp_path / "api", database_url=url) as api, api.client(token) as client:
        listed = {e["id"] for e in client.get("/api/executions").json()["executions"]}
        assert set(ids) <= listed
        assert client.get(f"/api/executions/{ids[0]}").json()["team_id"] == default.id
        created = client.post("/api/executions", json={
            "repo_url": api.repo_url, "provider": "replay", "prompt": "still works",
            "replay_script": {"turns": [{"final": {"status": "success", "summary": "ok"}}]}})
        assert created.status_code == 202, created.text
        api.tokens["all"] = token  # wait with the old token (read)
        row = wait_final(api, created.json()["id"])
    assert row["status"] == "succeeded" and row["team_id"] == default.id
