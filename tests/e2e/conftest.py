"""Fixtures the end-to-end tests ask for by name."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.celery_fixtures import Broker, claimed_broker


@pytest.fixture
def redis_broker() -> Iterator[Broker]:
    """A Redis database of the test's own on the real broker."""
    with claimed_broker() as broker:
        yield broker
