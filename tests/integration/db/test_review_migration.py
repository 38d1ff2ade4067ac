"""Migration 0016 (``pull_request_reviews``) upgrades a database of the previous release (0013)
without loss: an execution recorded before keeps its row; downgrading drops only the new table."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from services.db import migrate, models  # noqa: F401  (registers the tables)
from services.db.session import create_db_engine

INSERT = text("INSERT INTO node_executions (id, status, runtime, provider, model, request, "
              "prompt, limits, settings_snapshot, cost_usd, iterations, event_seq, "
              "lease_epoch, cancel_requested, created_at, updated_at) VALUES ('e-1', "
              "'succeeded', 'agent', 'replay', 'm', '{}', 'kept', '{}', '{}', 0, 0, 0, 0, "
              "false, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    made = create_db_engine(url)
    request.addfinalizer(made.dispose)
    return made


def test_0016_upgrades_the_previous_release_without_loss(engine: Engine) -> None:
    migrate.upgrade(engine, "0013")
    assert "pull_request_reviews" not in inspect(engine).get_table_names()
    with engine.begin() as conn:
        conn.execute(INSERT)
    migrate.upgrade(engine, "0016")
    assert "pull_request_reviews" in inspect(engine).get_table_names()
    with engine.begin() as conn:
        assert conn.execute(text("SELECT prompt FROM node_executions")).scalar_one() == "kept"
        conn.execute(text("INSERT INTO pull_request_reviews (execution_id, repository, "
                          "pr_number, head_sha, base_sha, verdict, review, inline, comments, "
                          "created_at) VALUES ('e-1', 'a/b', 1, 'h', 'b', 'comment', '{}', "
                          "'[]', '[]', CURRENT_TIMESTAMP)"))
    migrate.downgrade(engine, "0013")
    assert "pull_request_reviews" not in inspect(engine).get_table_names()
    with engine.begin() as conn:
        assert conn.execute(text("SELECT prompt FROM node_executions")).scalar_one() == "kept"
