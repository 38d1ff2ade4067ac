"""Hostile stored MCP servers over the real ``studio api`` with an admin token (issue 27, finding
5): an HTTP URL passes the repository host rules with the operator's allowlist
(``host_not_allowed``: metadata addresses and names, loopback, private and IPv6 literals in their
other spellings), holds no credential, query or fragment (``invalid_arguments``, the value never
echoed), no markup, no huge value; a stdio server has no ``cwd``. The positive controls: an
allowlisted internal address and a public name are stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.mcp_servers import McpServerRepository
from services.db.session import Database, create_db_engine
from tests.integration.api.server import ApiServer, api_process, studio_env
from tests.support.settings import studio_settings

ORIGIN = "http://127.0.0.1:9"
REPO = f"{ORIGIN}/acme/widgets.git"
SECRET = "url-SECRET-4f19c2"
ALLOWED = "10.9.8.7"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    root = tmp_path_factory.mktemp("mcp-hosts-api")
    env = {**studio_env(root, ORIGIN), "STUDIO_SECRET_KEY": "mcp-hosts-api-secret-key",
           "STUDIO_REPO_ALLOWED_HOSTS": ALLOWED}
    with api_process(env, REPO) as server:
        yield server


def _http(url: str, **extra: object) -> dict[str, object]:
    return {"name": "remote", "transport": "http", "url": url, **extra}


@pytest.mark.parametrize("url", [
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://127.0.0.1:8931/mcp",  # loopback, not in this deployment's allowlist
    "http://[::1]:8931/mcp",
    "http://[::ffff:169.254.169.254]/latest/meta-data/",
    "http://[fd00::1]/mcp",
    "http://[fe80::1]/mcp",
    "http://2852039166/latest/meta-data/",  # 169.254.169.254 as one number
    "http://0x7f000001/mcp",
    "http://10.0.0.1/mcp",
    "http://localhost:8931/mcp",
])
def test_an_internal_host_is_refused(api: ApiServer, url: str) -> None:
    with api.client(api.admin) as client:
        answer = client.post("/api/mcp-servers", json=_http(url))
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "host_not_allowed"
        assert "STUDIO_REPO_ALLOWED_HOSTS" in answer.json()["error"]["message"]
        assert client.get("/api/mcp-servers/remote").status_code == 404  # nothing stored


@pytest.mark.parametrize("url", [
    f"https://user:{SECRET}@mcp.example.com/mcp",
    f"https://{SECRET}@mcp.example.com/mcp",
    f"https://mcp.example.com/mcp?token={SECRET}",
    f"https://mcp.example.com/mcp?{SECRET}",
    f"https://mcp.example.com/mcp#{SECRET}",
    f"https://mcp.example.com/<script>{SECRET}</script>",
    f"https://mcp.example.com/\"onmouseover='{SECRET}'",
    "http://[::1/mcp",
    "http://mcp.example.com:99999/mcp",
    "ftp://mcp.example.com/mcp",
    "https:///mcp",
    "https://mcp.example.com/" + "a" * 5000,
])
def test_a_url_with_a_credential_query_fragment_markup_or_bad_shape_is_refused(
        api: ApiServer, url: str) -> None:
    with api.client(api.admin) as client:
        answer = client.post("/api/mcp-servers", json=_http(url))
        assert answer.status_code in (413, 422), answer.text
        assert answer.json()["error"]["code"] in ("invalid_arguments", "request_too_large")
        assert SECRET not in answer.text and "<script>" not in answer.text
        assert client.get("/api/mcp-servers/remote").status_code == 404
    assert SECRET not in "".join(api.log)


@pytest.mark.parametrize("server", [
    {"transport": "stdio", "command": "python3", "cwd": "/"},
    {"transport": "stdio", "command": "python3", "env": {"A=B": "x"}},
    {"transport": "stdio", "command": "python3", "env": {f"V{i}": "x" for i in range(65)}},
    {"transport": "stdio", "command": "python3", "args": ["x"] * 65},
    {"transport": "stdio", "command": "x" * 10_000},
    {"transport": "http", "url": "https://mcp.example.com/mcp",
     "headers": {"Authorization": f"Bearer {SECRET}\r\nX-Injected: 1"}},
    {"transport": "http", "url": "https://mcp.example.com/mcp",
     "headers": {"Bad Header": SECRET}},
    {"transport": "http", "url": "https://mcp.example.com/mcp",
     "headers": {"Authorization": SECRET * 1000}},
    {"transport": "http", "url": "https://mcp.example.com/mcp", "timeout_s": 1e12},
    {"transport": "http", "url": "https://mcp.example.com/mcp", "required": "<b>yes</b>"},
])
def test_hostile_server_fields_are_refused(api: ApiServer, server: dict[str, object]) -> None:
    with api.client(api.admin) as client:
        answer = client.post("/api/mcp-servers", json={"name": "hostile", **server})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "invalid_arguments"
        assert SECRET not in answer.text and "<b>" not in answer.text
        assert client.get("/api/mcp-servers/hostile").status_code == 404


def test_positive_control_an_allowlisted_or_public_host_is_stored_without_its_secrets(
        api: ApiServer) -> None:
    header = f"Bearer {SECRET}"
    with api.client(api.admin) as client:
        for name, url in (("allowed", f"http://{ALLOWED}:8931/mcp"),
                          ("public", "https://mcp.example.com/mcp")):
            created = client.post("/api/mcp-servers", json={
                "name": name, "transport": "http", "url": url, "required": True,
                "headers": {"Authorization": header}})
            assert created.status_code == 201, created.text
            assert created.json()["config"]["url"] == url
            assert created.json()["config"]["required"] is True
        listed = client.get("/api/mcp-servers").text
        for name in ("allowed", "public"):
            assert client.delete(f"/api/mcp-servers/{name}").status_code == 204
    assert SECRET not in created.text + listed + "".join(api.log)
    stored = Path(api.db_url.removeprefix("sqlite:///")).read_bytes()
    assert SECRET.encode() not in stored
    assert json.loads(listed)["servers"][0]["secret_keys"] == {"headers": ["Authorization"]}


def test_a_row_stored_before_the_url_rules_is_answered_without_its_credentials(
        api: ApiServer) -> None:
    db = Database(create_db_engine(api.db_url))
    try:  # written straight to the table, as a server stored before these rules could be
        McpServerRepository(db, studio_settings(secret_key="mcp-hosts-api-secret-key")).create(
            "legacy", {"transport": "http",
                       "url": f"https://u:{SECRET}@mcp.example.com/m?k={SECRET}"})
    finally:
        db.dispose()
    with api.client(api.admin) as client:
        one = client.get("/api/mcp-servers/legacy")
        listed = client.get("/api/mcp-servers")
        assert client.delete("/api/mcp-servers/legacy").status_code == 204
    assert one.status_code == 200, one.text
    assert one.json()["config"]["url"] == "https://[redacted]@mcp.example.com/m?[redacted]"
    assert SECRET not in one.text + listed.text
