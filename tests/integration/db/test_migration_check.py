"""The check every ``studio`` process makes when it opens the database: at head, told without
Alembic (``migrate.is_current``), and Alembic asked whenever that check is not certain."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from services.db import migrate
from services.db.session import create_db_engine, open_database
from services.settings import StudioSettings, get_settings


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Engine:
    url = (f"sqlite:///{tmp_path / 'check.db'}" if request.param == "sqlite"
           else request.getfixturevalue("fresh_pg_url"))
    found = create_db_engine(url)
    request.addfinalizer(found.dispose)
    return found


def test_current_only_at_the_heads_alembic_names(engine: Engine) -> None:
    assert migrate.is_current(engine) is False  # no version table yet
    migrate.upgrade(engine)
    assert migrate.is_current(engine) is True
    assert migrate.current_revisions(engine) == migrate.head_revisions()
    migrate.downgrade(engine, "-1")
    assert migrate.is_current(engine) is False
    with engine.begin() as connection:  # a revision no script knows
        connection.execute(text("UPDATE alembic_version SET version_num = 'zz99'"))
    assert migrate.is_current(engine) is False


def test_the_script_heads_are_alembics() -> None:
    assert migrate._script_heads() == migrate.head_revisions()


def test_unreadable_scripts_leave_it_to_alembic(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A script whose revision is not a literal: not certain, so not current (the caller then
    migrates or compares with Alembic itself)."""
    versions = tmp_path / "migrations" / "versions"
    versions.mkdir(parents=True)
    (tmp_path / "migrations" / "env.py").write_text("")
    (versions / "0001_x.py").write_text('revision = "00" + "01"\ndown_revision = None\n')
    monkeypatch.setenv("STUDIO_MIGRATIONS_DIR", str(tmp_path / "migrations"))
    get_settings.cache_clear()
    try:
        assert migrate._script_heads() is None
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_an_embedded_database_opened_twice_is_migrated_once(tmp_path: Path) -> None:
    settings = StudioSettings(data_dir=tmp_path / "data")
    first = open_database(settings)
    try:
        assert migrate.is_current(first.engine)
    finally:
        first.dispose()
    second = open_database(settings)  # the fast path: nothing to do
    try:
        assert migrate.current_revisions(second.engine) == migrate.head_revisions()
    finally:
        second.dispose()


def test_a_busy_writer_does_not_hold_up_the_check(engine: Engine) -> None:
    """A process opening the database while another holds a write transaction (a worker's
    task, next to a run writing its journal) reads the version without waiting for the write
    lock: on SQLite a deferred read in WAL mode; without it, the check queued for the lock up
    to the busy timeout (30 s) and, timed out, fell back on Alembic, which queued again."""
    migrate.upgrade(engine)
    writer = create_db_engine(str(engine.url.render_as_string(hide_password=False)))
    try:
        with writer.begin() as connection:  # BEGIN IMMEDIATE on SQLite: the write lock
            connection.execute(text("UPDATE alembic_version SET version_num = version_num"))
            assert migrate.is_current(engine) is True
    finally:
        writer.dispose()
