"""Fixtures of the flowchart tests: the persistence databases, settings and a workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.settings import StudioSettings
from tests.integration.api.conftest import api  # noqa: F401  (fixture used by name)
from tests.integration.celery_fixtures import redis_broker  # noqa: F401  (fixture used by name)
from tests.integration.db.conftest import (  # noqa: F401  (fixtures used by name)
    db,
    pg_admin,
    postgres_db,
    postgres_url,
    sqlite_db,
)


@pytest.fixture
def settings(tmp_path: Path) -> StudioSettings:
    return StudioSettings(data_dir=tmp_path / "data")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path
