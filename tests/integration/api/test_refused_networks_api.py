"""``POST /api/executions`` with a ``run`` token: a repository URL naming an address in a row of
the table of refused networks (site-local ``fec0::/10`` among them, which Python's
``is_global`` calls public) is ``host_not_allowed`` (422) and nothing is recorded. The control:
the API's own git host (allowed by ``STUDIO_REPO_ALLOWED_HOSTS``) is accepted by the same call."""

from __future__ import annotations

from typing import Any

import pytest

from services.execution.errors import ErrorCode
from tests.integration.api.server import ApiServer

SCRIPT = {"turns": [{"final": "done"}]}


def _post(api: ApiServer, repo_url: str) -> tuple[int, dict[str, Any]]:
    body = {"repo_url": repo_url, "provider": "replay", "prompt": "p", "replay_script": SCRIPT}
    with api.client(api.token("runner", ["run"])) as client:
        response = client.post("/api/executions", json=body)
    document: dict[str, Any] = response.json()
    return response.status_code, document


@pytest.mark.parametrize("repo_url", [
    "https://[fec0::1]/x/y",
    "https://[fec0::a9fe:a9fe]/x/y",
    "https://[fd00::1]/x/y",
    "https://100.64.0.1/x/y",
    "https://[::127.0.0.1]/x/y",
    "https://[2002:c0a8:101::1]/x/y",
    "https://[64:ff9b:1::a]/x/y",
    "https://[2001:db8::1]/x/y",
])
def test_a_refused_network_is_host_not_allowed(api: ApiServer, repo_url: str) -> None:
    status, body = _post(api, repo_url)
    assert status == 422 and body["error"]["code"] == ErrorCode.HOST_NOT_ALLOWED.value, body
    assert "STUDIO_REPO_ALLOWED_HOSTS" in body["error"]["message"]
    with api.client(api.admin) as client:
        listed = client.get("/api/executions", params={"limit": 500}).json()["executions"]
    assert repo_url not in [e["repo_url"] for e in listed]


def test_the_control_an_allowed_host_is_accepted(api: ApiServer) -> None:
    status, body = _post(api, api.repo_url)
    assert status == 202, body
