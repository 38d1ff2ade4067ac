"""Migration 0019 (``eval_runs``, ``eval_items``) on a database of the previous release: the
executions already there stay, an eval item links to one, and a grade is written only once."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from services.db import migrate
from services.db.evals import EvalRepository, Grade, ItemKey
from services.db.session import Database, create_db_engine


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    engine = create_db_engine(url)
    request.addfinalizer(engine.dispose)
    return engine


def test_upgrade_keeps_executions_and_links_eval_items(engine: Engine) -> None:
    migrate.upgrade(engine, "0013")
    with engine.begin() as connection:
        connection.execute(text(
            "INSERT INTO node_executions (id, status, runtime, provider, model, prompt, request,"
            " limits, settings_snapshot, cost_usd, iterations, cancel_requested, event_seq,"
            " lease_epoch, yielded_attempts, created_at, updated_at) VALUES ('e-old', "
            "'succeeded', 'agent', 'replay', 'replay', 'kept', '{}', '{}', '{}', 0.5, 2, "
            ":no, 0, 1, 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"), {"no": False})
    migrate.upgrade(engine)
    with engine.connect() as connection:
        assert connection.execute(text(
            "SELECT prompt FROM node_executions WHERE id = 'e-old'")).scalar_one() == "kept"
    evals = EvalRepository(Database(engine))
    run_id = evals.create_run("s", "/s", {"matrix": {}})
    evals.ensure_items(run_id, [ItemKey("t", "replay/replay/-", 0)] * 2)  # recorded once
    (item,) = evals.items(run_id)
    evals.link_execution(item.id, "e-old")
    assert evals.grade(item.id, Grade(True, ["a"], cost_usd=0.5))
    assert not evals.grade(item.id, Grade(False, [], ["a"]))  # the first grade stays
    (graded,) = evals.items(run_id)
    assert graded.execution_id == "e-old" and graded.grade is not None
    assert graded.grade.resolved and graded.grade.tests_passed == ["a"]
    migrate.downgrade(engine, "0013")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM node_executions")).scalar_one() == 1
