"""The agent fields over the real ``studio api``: stored MCP servers (admin: create, list, get,
delete; secrets never answered, logged or stored in clear), hostile roles, prompts, server
lists and model lists refused with stable codes, a flowchart naming an unknown server refused
with the node named, and an accepted profile recorded on the execution for any process to run.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.session import Database, create_db_engine
from services.runs.request import ExecutionRequest
from tests.integration.api.server import ApiServer, api_process, studio_env
from tests.integration.mcp_fixtures import stdio_server_entry

ORIGIN = "http://127.0.0.1:9"
REPO = f"{ORIGIN}/acme/widgets.git"
ENV_SECRET = "api-mcp-env-SECRET-6a61d0c2"
HEADER_SECRET = "Bearer api-mcp-header-SECRET-0b9e"


@pytest.fixture(scope="module")
def keyed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    root = tmp_path_factory.mktemp("agents-api")
    env = {**studio_env(root, ORIGIN), "STUDIO_SECRET_KEY": "agents-api-test-secret-key"}
    with api_process(env, REPO) as server:
        yield server


def _no_secret(*texts: str) -> None:
    for text in texts:
        assert "api-mcp-env-SECRET" not in text and "api-mcp-header-SECRET" not in text


def _db_file(api: ApiServer) -> Path:
    return Path(api.db_url.removeprefix("sqlite:///"))


def test_stored_mcp_servers_never_answer_their_secrets(keyed_api: ApiServer) -> None:
    stdio = {"name": "files", **stdio_server_entry(env={"DEMO_TOKEN": ENV_SECRET})}
    http = {"name": "docs", "transport": "http", "url": "http://127.0.0.1:9/mcp",
            "headers": {"Authorization": HEADER_SECRET}}
    answers: list[str] = []
    with keyed_api.client(keyed_api.admin) as client:
        for body in (stdio, http):
            created = client.post("/api/mcp-servers", json=body)
            answers.append(created.text)
            assert created.status_code == 201, created.text
            assert created.headers["location"] == f"/api/mcp-servers/{body['name']}"
        files = client.get("/api/mcp-servers/files").json()
        assert files["secret_keys"] == {"env": ["DEMO_TOKEN"], "headers": []}
        assert "env" not in files["config"] and files["config"]["command"]
        docs = client.get("/api/mcp-servers/docs").json()
        assert docs["secret_keys"] == {"headers": ["Authorization"]}
        listed = client.get("/api/mcp-servers")
        assert [s["name"] for s in listed.json()["servers"]] == ["docs", "files"]
        again = client.post("/api/mcp-servers", json=stdio)
        assert again.status_code == 409 and again.json()["error"]["code"] == "mcp_server_exists"
        bad = client.post("/api/mcp-servers", json={
            "name": "broken", "transport": "stdio", "env": {"X": ENV_SECRET}})  # no command
        assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_arguments"
        wrong = client.post("/api/mcp-servers", json={
            "name": "ftp", "transport": "ftp", "headers": {"A": HEADER_SECRET}})
        assert wrong.status_code == 422
        hostile_name = client.post("/api/mcp-servers", json={**http, "name": "<b>x</b>"})
        assert hostile_name.status_code == 422
        answers += [json.dumps(files), json.dumps(docs), listed.text, again.text,
                    bad.text, wrong.text, hostile_name.text]
        assert client.delete("/api/mcp-servers/docs").status_code == 204
        gone = client.get("/api/mcp-servers/docs")
        assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found"
        assert client.delete("/api/mcp-servers/docs").status_code == 404
    _no_secret(*answers, "".join(keyed_api.log))
    stored = _db_file(keyed_api).read_bytes()
    assert ENV_SECRET.encode() not in stored and b"api-mcp-header-SECRET" not in stored


def test_a_flowchart_naming_an_unknown_server_is_refused_with_the_node_named(
        keyed_api: ApiServer) -> None:
    def graph(servers: list[str]) -> dict[str, Any]:
        return {"nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "review", "type": "agent", "config": {
                "provider": "codex", "prompt": "Review.", "role": "reviewer",
                "mcp_servers": servers}},
            {"id": "end", "type": "end", "config": {}}],
            "edges": [{"id": "a", "source": "start", "target": "review"},
                      {"id": "b", "source": "review", "target": "end"}]}

    with keyed_api.client(keyed_api.admin) as client:
        client.post("/api/mcp-servers", json={"name": "known", "transport": "http",
                                              "url": "http://127.0.0.1:9/mcp"})
        refused = client.post("/api/flowcharts", json={"name": "f",
                                                       "graph": graph(["known", "nope"])})
        assert refused.status_code == 422
        problems = refused.json()["error"]["details"]["problems"]
        assert [(p["code"], p["node_id"]) for p in problems] == [
            ("unknown_mcp_server", "review")]
        accepted = client.post("/api/flowcharts", json={"name": "f", "graph": graph(["known"])})
        assert accepted.status_code == 201, accepted.text
        role = graph([])
        role["nodes"][1]["config"]["role"] = "<script>boss</script>"
        unknown = client.post("/api/flowcharts", json={"name": "f", "graph": role})
        assert unknown.status_code == 422
        assert [(p["code"], p["node_id"]) for p in unknown.json()["error"]["details"][
            "problems"]] == [("unknown_role", "review")]


@pytest.mark.parametrize(("extra", "code", "reason"), [
    ({"role": "admin"}, "unknown_role", "unknown_role"),
    ({"system_prompt": "x" * 40_000}, "invalid_arguments", "system_prompt_too_long"),
    ({"system_prompt": "a\x00b"}, "invalid_arguments", "invalid_system_prompt"),
    ({"models": []}, "invalid_arguments", "invalid_models"),
    ({"models": ["nope:model"]}, "invalid_arguments", "invalid_models"),
    ({"models": ["gemini"]}, "invalid_arguments", "invalid_models"),  # not the provider
    ({"models": ["codex", "codex"]}, "invalid_arguments", "invalid_models"),
    ({"models": [{"provider": "codex", "model": "x", "extra": 1}]}, "invalid_arguments",
     "invalid_models"),
    ({"models": ["codex"] * 6}, "invalid_arguments", "invalid_models"),
    ({"mcp_servers": ["a", "a"]}, "invalid_arguments", "duplicate_mcp_server"),
    ({"mcp_servers": ["../etc"]}, "invalid_arguments", "invalid_mcp_servers"),
])
def test_hostile_agent_fields_of_an_execution_are_refused(
        keyed_api: ApiServer, extra: dict[str, Any], code: str, reason: str) -> None:
    body = {"repo_url": REPO, "provider": "codex", "prompt": "p", **extra}
    with keyed_api.client(keyed_api.token("runner", ["run", "read"])) as client:
        before = len(client.get("/api/executions").json()["executions"])
        answer = client.post("/api/executions", json=body)
        after = len(client.get("/api/executions").json()["executions"])
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and error["details"]["reason"] == reason
    assert "x" * 1000 not in answer.text  # a huge value is not echoed back
    assert after == before  # nothing recorded


def test_an_unknown_server_refuses_the_execution_and_a_good_profile_is_recorded(
        keyed_api: ApiServer) -> None:
    with keyed_api.client(keyed_api.admin) as client:
        client.post("/api/mcp-servers", json={"name": "tracker", "transport": "http",
                                              "url": "http://127.0.0.1:9/mcp"})
        unknown = client.post("/api/executions", json={
            "repo_url": REPO, "provider": "codex", "prompt": "p", "mcp_servers": ["ghost"]})
        assert unknown.status_code == 422
        assert unknown.json()["error"]["code"] == "unknown_mcp_server"
        created = client.post("/api/executions", json={
            "repo_url": REPO, "provider": "codex", "prompt": "p", "role": "tester",
            "system_prompt": "Run the slow tests too.", "mcp_servers": ["tracker"],
            "models": ["codex:gpt-5.1", {"provider": "claude", "model": "claude-sonnet-4-5"}]})
        assert created.status_code == 202, created.text
    db = Database(create_db_engine(keyed_api.db_url))
    try:
        row = ExecutionRepository(db).get(created.json()["id"])
        assert row is not None and row.model == "gpt-5.1"  # from models[0]
        profile = ExecutionRequest.from_row(row).profile  # what ``studio execute`` reads
    finally:
        db.dispose()
    assert profile.role == "tester" and profile.system_prompt == "Run the slow tests too."
    assert profile.mcp_servers == ("tracker",)
    assert [m.label() for m in profile.models] == ["codex:gpt-5.1", "claude:claude-sonnet-4-5"]
