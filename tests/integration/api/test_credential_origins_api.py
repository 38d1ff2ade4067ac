"""Through the HTTP API with a ``run``-scoped token: an execution on a repository outside the
integration's git origin never gets the deployment's GitHub token, and repository hosts on
internal addresses are refused (``host_not_allowed``).

The API server's integration origin is its own git host (``STUDIO_GITHUB_GIT_ORIGINS``); the
second host here serves the same repository publicly and records every request's headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.errors import ErrorCode
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import GIT_TOKEN, REPO, ApiServer
from tests.support.git_http_server import (
    RECEIVE_PACK,
    UPLOAD_PACK,
    GitHttpHost,
    git_http_server,
    seed_bare_repo,
)

SCRIPT = {"turns": [
    {"tool_calls": [{"tool": "git.fetch", "args": {}}]},
    {"tool_calls": [{"tool": "workspace.write_file", "args": {"path": "a.txt", "content": "a\n"}}]},
    {"tool_calls": [{"tool": "git.add", "args": {"paths": ["a.txt"]}}]},
    {"tool_calls": [{"tool": "git.commit", "args": {"message": "a"}}]},
    {"tool_calls": [{"tool": "git.push", "args": {}}]},
    {"tool_calls": [{"tool": "git.create_pull_request", "args": {"title": "a"}}]},
    {"final": "done"},
]}


@pytest.fixture
def other(tmp_path: Path) -> Iterator[GitHttpHost]:
    with git_http_server(tmp_path / "other", "ghs_OtherHostToken0123456789abcdef",
                         anonymous_reads=True) as host:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        yield host


def _post(api: ApiServer, repo_url: str, **extra: Any) -> tuple[int, dict[str, Any]]:
    body = {"repo_url": repo_url, "provider": "replay", "prompt": "p",
            "replay_script": SCRIPT, **extra}
    with api.client(api.token("runner", ["run"])) as client:
        response = client.post("/api/executions", json=body)
    document: dict[str, Any] = response.json()
    return response.status_code, document


def test_a_pull_request_on_another_origin_is_refused(api: ApiServer,
                                                     other: GitHttpHost) -> None:
    status, body = _post(api, other.url(REPO), pull_request=True)
    assert status == 503 and body["error"]["code"] == ErrorCode.INTEGRATION_UNAVAILABLE.value
    assert body["error"]["details"]["origin"] == other.base_url
    assert "STUDIO_GITHUB_GIT_ORIGINS" in body["error"]["message"]
    assert other.requests == []


def test_another_origin_never_sees_the_token(api: ApiServer, other: GitHttpHost) -> None:
    status, body = _post(api, other.url(REPO), pull_request=False)
    assert status == 202, body
    row = wait_final(api, body["id"])
    assert row["status"] == "failed" and row["error_code"] == ErrorCode.AUTH_FAILED.value, row
    assert {UPLOAD_PACK, RECEIVE_PACK} <= {r.service for r in other.requests}
    assert [r.authorization for r in other.requests if r.authorization] == []
    assert other.pushes == []
    assert all(GIT_TOKEN not in line for line in api.log)


@pytest.mark.parametrize("repo_url", [
    "https://169.254.169.254/latest/meta-data.git",
    "https://10.0.0.1/acme/widgets.git",
    "https://[::ffff:a9fe:a9fe]/acme/widgets.git",
    "https://2852039166/acme/widgets.git",
    "https://0xa9fea9fe/acme/widgets.git",
    "https://metadata.google.internal/computeMetadata/v1.git",
])
def test_internal_hosts_are_refused_when_the_execution_is_created(api: ApiServer,
                                                                  repo_url: str) -> None:
    status, body = _post(api, repo_url, pull_request=False)
    assert status == 422 and body["error"]["code"] == ErrorCode.HOST_NOT_ALLOWED.value, body
    with api.client(api.admin) as client:
        listed = client.get("/api/executions", params={"limit": 500}).json()["executions"]
    assert repo_url not in [e["repo_url"] for e in listed]
