"""API tokens (stored hashed, scopes exact) and the Prometheus exposition, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from services.api.metrics import exposition
from services.db import migrate
from services.db.api_tokens import ApiTokenRepository, InvalidScopes, parse_scopes, token_hash
from services.db.models import ApiToken
from services.db.session import Database, create_db_engine
from services.telemetry import record


@pytest.fixture
def db(tmp_path: Path) -> Database:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'studio.db'}")
    migrate.upgrade(engine)
    return Database(engine)


def test_only_the_hash_is_stored_and_the_token_verifies(db: Database) -> None:
    repository = ApiTokenRepository(db)
    token_id, token = repository.create("ci", "run,read")
    with db.session() as session:
        row = session.scalars(select(ApiToken)).one()
    assert row.token_hash == token_hash(token) and token not in repr(row)
    assert len(token) > 40 and token.startswith("studio_")
    identity = repository.verify(token)
    assert identity is not None and identity.scopes == {"read", "run"} and identity.id == token_id
    assert repository.verify(token + "x") is None
    assert repository.revoke(token_id) and repository.verify(token) is None


@pytest.mark.parametrize("raw", ["", "read,root", "ADMIN", ","])
def test_scopes_are_a_non_empty_subset_of_the_known_ones(raw: str) -> None:
    with pytest.raises(InvalidScopes):
        parse_scopes(raw)


def test_scopes_are_normalized() -> None:
    assert parse_scopes(" admin, read ,read") == ["admin", "read"]


def test_exposition_is_prometheus_text() -> None:
    record.api_request("GET", 200)
    record.api_request("GET", 404)
    text = exposition({"running": 2, "failed": 1, "queued": 3}, {"ok": 5, 'we"ird': 1})
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    assert text.endswith("\n")
    assert samples[("studio_executions", (("status", "running"),))] == 2
    assert samples[("studio_executions", (("status", "succeeded"),))] == 0
    assert samples[("studio_executions_finished_total", (("status", "failed"),))] == 1
    assert samples[("studio_tool_calls_total", (("outcome", 'we"ird'),))] == 1
    assert samples[("studio_queue_depth", ())] == 3
    assert samples[("studio_executions_running", ())] == 2
    assert samples[("studio_api_requests_total", (("method", "GET"), ("status", "4xx")))] >= 1
