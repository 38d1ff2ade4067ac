"""Fixtures of the API tests: one running ``studio api`` per test module."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.api.server import ApiServer, running_api


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with running_api(tmp_path_factory.mktemp("api")) as server:
        yield server
