"""Fixtures of the worker tests: settings on a throw-away SQLite file, no broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.session import Database, open_database
from services.settings import StudioSettings
from tests.support.settings import studio_settings


@pytest.fixture
def worker_settings(tmp_path: Path) -> StudioSettings:
    """No broker (the embedded default), an SQLite file database, a workspace root of its own
    (a reaper pass deletes the directories of executions its database does not know)."""
    return studio_settings(tmp_path / "data", database_url=f"sqlite:///{tmp_path / 'studio.db'}",
                           workspace_dir=tmp_path / "workspaces", broker_url=None)


@pytest.fixture
def worker_db(worker_settings: StudioSettings) -> Iterator[Database]:
    db = open_database(worker_settings)
    yield db
    db.dispose()
