"""``POST /api/executions`` with the setup phase's fields against a running ``studio api``:
hostile values are refused with a stable code before anything is recorded."""

from __future__ import annotations

from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.session import Database, create_db_engine
from services.runs.request import ExecutionRequest
from tests.integration.api.server import ApiServer


def _body(api: ApiServer, **fields: Any) -> dict[str, Any]:
    return {"repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": {"turns": [{"final": "done"}]}, **fields}


@pytest.mark.parametrize(("fields", "code"), [
    ({"setup": "pip install x"}, "invalid_arguments"),
    ({"setup": ["true"] * 33}, "invalid_arguments"),
    ({"setup": [""]}, "config_error"),
    ({"setup": ["a\u0000b"]}, "config_error"),
    ({"setup": ["x" * 9000]}, "config_error"),
    ({"network": "online"}, "invalid_arguments"),
    ({"network_allowlist": ["127.0.0.1:5432"]}, "config_error"),
    ({"network_allowlist": ["169.254.169.254:80"]}, "config_error"),
    ({"network_allowlist": ["user@pypi.org"]}, "config_error"),
    ({"network_allowlist": ["pypi.org:99999"]}, "config_error"),
    ({"network_allowlist": ["<script>.org"]}, "config_error"),
    ({"network_allowlist": [".org"]}, "config_error"),
    ({"network_allowlist": ["x"] * 201}, "invalid_arguments"),
])
def test_hostile_setup_fields_are_refused(api: ApiServer, fields: dict[str, Any],
                                          code: str) -> None:
    with api.client(api.admin) as client:
        before = client.get("/api/executions").json()
        answer = client.post("/api/executions", json=_body(api, **fields))
        after = client.get("/api/executions").json()
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == code
    assert after == before  # nothing recorded


def test_setup_fields_are_accepted_and_recorded(api: ApiServer) -> None:
    """Accepted (202) and recorded: the execution read back from the API's database carries the
    three fields as sent (the public ``Execution`` body does not show them)."""
    setup = ["python3 -m pip install --target .deps -r requirements.txt"]
    allowlist = ["example.org", ".example.net:8443"]
    with api.client(api.admin) as client:
        answer = client.post("/api/executions", json=_body(
            api, setup=setup, network="allowlist", network_allowlist=allowlist))
    assert answer.status_code == 202, answer.text
    db = Database(create_db_engine(api.db_url))
    try:
        row = ExecutionRepository(db).get(answer.json()["id"])
        assert row is not None
        request = ExecutionRequest.from_row(row)
    finally:
        db.dispose()
    assert (request.setup, request.network, request.network_allowlist) == (
        tuple(setup), "allowlist", tuple(allowlist))
