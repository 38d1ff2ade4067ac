"""Agent nodes with a role and a system prompt, run in process through the real SDKs (codex,
gemini, and claude through its bundled Claude Code CLI) against the scripted model server.

A reviewer node's model is offered no mutating tool (the tools the server saw declared are the
read-only operations of the registry, derived from their metadata), and the node's own
``system_prompt`` reaches each provider's request next to the role's prompt and the
repository's own instructions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.session import Database
from services.execution.roles import ROLES
from services.execution.tool_domains.registry import default_registry
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import create, edges, node
from tests.support.model_requests import RequestRecord
from tests.support.model_server import ScriptedModelServer, text

API_KEY = "sk-roles-test-KEY-5e0c2a"
DONE = json.dumps({"status": "success", "summary": "reviewed"})
NODE_PROMPT = "Pay attention to naming. Marker: NODE-PROMPT-4411."
REPO_RULE = "Repository rule: REPO-RULE-9923."
# provider: (model, vendor of the server's record, base-URL variable, URL suffix, key variable)
PROVIDERS: dict[str, tuple[str, str, str, str, str]] = {
    "codex": ("gpt-5.1", "openai", "OPENAI_BASE_URL", "/v1", "OPENAI_API_KEY"),
    "gemini": ("gemini-2.5-pro", "gemini", "GOOGLE_GEMINI_BASE_URL", "", "GEMINI_API_KEY"),
    "claude": ("claude-sonnet-4-5", "anthropic", "ANTHROPIC_BASE_URL", "", "ANTHROPIC_API_KEY"),
}
CLAUDE_PREFIX = "mcp__studio__"  # how Claude Code names the tools of our in-process server


def system_text(record: RequestRecord) -> str:
    """The system prompt a request carried, in its vendor's wire format."""
    body: dict[str, Any] = record.body if isinstance(record.body, dict) else {}
    if record.vendor == "openai":
        if isinstance(body.get("instructions"), str):
            return str(body["instructions"])
        return "".join(str(m.get("content")) for m in body.get("messages", [])
                       if isinstance(m, dict) and m.get("role") in ("system", "developer"))
    if record.vendor == "gemini":
        instruction = body.get("systemInstruction") or body.get("system_instruction") or {}
        return "".join(str(p.get("text", "")) for p in instruction.get("parts", []))
    system = body.get("system")
    if isinstance(system, list):
        return "".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
    return str(system or "")


def declared_names(server: ScriptedModelServer, record: RequestRecord) -> set[str]:
    return {t.name.removeprefix(CLAUDE_PREFIX) for t in server.declared_tools(record)}


def _wire(monkeypatch: pytest.MonkeyPatch, provider: str, server: ScriptedModelServer) -> None:
    _, _, url_env, suffix, key_env = PROVIDERS[provider]
    monkeypatch.setenv(url_env, server.url + suffix)
    monkeypatch.setenv(key_env, API_KEY)


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_a_reviewer_node_is_offered_no_mutating_tool_and_its_prompt_reaches_the_provider(
        provider: str, db: Database, settings: StudioSettings, ws: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    (ws / "AGENTS.md").write_text(REPO_RULE + "\n")
    model, vendor = PROVIDERS[provider][:2]
    graph = {"nodes": [
        node("start", "start"),
        node("review", "agent", provider=provider, model=model, prompt="Review the change.",
             role="reviewer", system_prompt=NODE_PROMPT),
        node("end", "end"),
    ], "edges": edges(("start", "review"), ("review", "end"))}
    with ScriptedModelServer([text(DONE)]) as server:
        _wire(monkeypatch, provider, server)
        service = FlowchartRunService(db, settings)
        run = service.get(service.start(create(db, graph), workspace=str(ws)))
        requests = server.requests_for(vendor)
    assert run["status"] == "succeeded", run
    assert requests, "the provider was never called"
    specs = default_registry().specs()
    read_only = {s.name for s in specs if not s.mutates}
    mutating = {s.name for s in specs if s.mutates}
    assert mutating and read_only  # the metadata splits the registry both ways
    for record in requests:
        names = declared_names(server, record)
        assert names == read_only, sorted(names ^ read_only)
        assert not names & mutating
        system = system_text(record)
        assert NODE_PROMPT in system
        assert ROLES["reviewer"].prompt in system
        assert REPO_RULE in system  # the repository's own instructions still join
    row = ExecutionRepository(db).get(run["nodes"]["review"]["execution_id"])
    assert row is not None
    assert row.settings_snapshot["agent"]["role"] == "reviewer"
    assert row.settings_snapshot["agent"]["system_prompt"] == NODE_PROMPT


def test_a_reviewer_call_to_a_mutating_tool_is_refused_as_not_allowed(
        db: Database, settings: StudioSettings, ws: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry itself is restricted: a model that names a write anyway gets
    tool_not_allowed and nothing is written."""
    from tests.support.model_server import tool_calls

    graph = {"nodes": [
        node("start", "start"),
        node("review", "agent", provider="codex", model="gpt-5.1", prompt="Review.",
             role="reviewer"),
        node("end", "end"),
    ], "edges": edges(("start", "review"), ("review", "end"))}
    script = [tool_calls([("workspace_write_file", {"path": "x.txt", "content": "no"})]),
              text(DONE)]
    with ScriptedModelServer(script) as server:
        _wire(monkeypatch, "codex", server)
        service = FlowchartRunService(db, settings)
        run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "succeeded", run
    assert not (ws / "x.txt").exists()
    calls = ExecutionRepository(db).tool_calls(run["nodes"]["review"]["execution_id"])
    assert [(c.tool_name, c.ok, c.error_code) for c in calls] == [
        ("workspace_write_file", False, "tool_not_allowed")]


def test_an_implementer_gets_every_tool_and_a_tester_the_commands_too(
        db: Database, settings: StudioSettings, ws: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    graph = {"nodes": [
        node("start", "start"),
        node("impl", "agent", provider="codex", prompt="Implement.", role="implementer"),
        node("test", "agent", provider="codex", prompt="Test.", role="tester"),
        node("end", "end"),
    ], "edges": edges(("start", "impl"), ("impl", "test"), ("test", "end"))}
    with ScriptedModelServer([text(DONE), text(DONE)]) as server:
        _wire(monkeypatch, "codex", server)
        service = FlowchartRunService(db, settings)
        run = service.get(service.start(create(db, graph), workspace=str(ws)))
        first, second = (declared_names(server, r) for r in server.requests_for("openai"))
    assert run["status"] == "succeeded", run
    specs = default_registry().specs()
    assert first == {s.name for s in specs}
    assert second == {s.name for s in specs if not s.mutates or s.domain == "command"}
    assert "command_run" in second and "workspace_write_file" not in second


def test_a_node_on_the_legacy_runtime_with_a_role_is_refused_not_run_without_it(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    """The provider's own CLI would apply no role: a reviewer that could write. Refused."""
    graph = {"nodes": [
        node("start", "start"),
        node("review", "agent", provider="codex", prompt="Review.", role="reviewer",
             __agent_runtime_cutover_enabled=False),
        node("end", "end"),
    ], "edges": edges(("start", "review"), ("review", "end"))}
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "failed"
    review = run["nodes"]["review"]
    assert review["error_code"] == "unsupported_capability"
    assert "legacy runtime" in review["error_message"]
    assert ExecutionRepository(db).tool_calls(review["execution_id"]) == []
