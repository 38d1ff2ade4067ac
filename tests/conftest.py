"""Shared fixtures: a throw-away workspace and the tool context around it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[Path]:
    """An empty workspace directory, with a sibling ``outside`` directory holding a secret."""
    root = tmp_path / "ws"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP-SECRET-OUTSIDE\n")
    yield root
