"""Migration 0020 (``github_triggers.review``) upgrades a database of the previous release
(0019) without loss, every existing trigger with review off, on SQLite and PostgreSQL, and
downgrades back to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from services.db import migrate
from services.db.session import create_db_engine


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    built = create_db_engine(url)
    request.addfinalizer(built.dispose)
    return built


def _columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("github_triggers")}


def test_a_0019_database_upgrades_with_review_off_and_downgrades(engine: Engine) -> None:
    migrate.upgrade(engine, "0019")
    assert "review" not in _columns(engine)
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO github_triggers (repository, repo_url, label, command, provider, "
            "limits, enabled, created_at, updated_at) VALUES ('acme/widgets', "
            "'https://github.com/acme/widgets.git', 'studio', '/studio', 'codex', '{}', "
            ":on, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)"), {"on": True})
    migrate.upgrade(engine)
    assert migrate.differences(engine) == []

    def kept() -> list[tuple[object, ...]]:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(
                "SELECT repository, label, provider, enabled FROM github_triggers"))]

    assert kept() == [("acme/widgets", "studio", "codex", True)]
    with engine.connect() as conn:
        assert conn.execute(text("SELECT review FROM github_triggers")).scalar() in (False, 0)
    migrate.downgrade(engine, "0019")
    assert "review" not in _columns(engine)
    assert kept() == [("acme/widgets", "studio", "codex", True)]
