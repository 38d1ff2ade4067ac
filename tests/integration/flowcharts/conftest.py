"""Fixtures of the flowchart tests: settings and a workspace (the databases, the broker and the
API come from ``tests/integration/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.settings import StudioSettings
from tests.support.settings import studio_settings


@pytest.fixture
def settings(tmp_path: Path) -> StudioSettings:
    return studio_settings(tmp_path / "data")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = tmp_path / "ws"
    path.mkdir()
    return path
