"""An agent node's role, system prompt, MCP servers and models are checked when the graph is
parsed; each problem names the node and carries a stable code."""

from __future__ import annotations

import json
from typing import Any

import pytest

from services.flowcharts.graph import AgentConfig, FlowchartValidationError, parse_graph


def _graph(**config: Any) -> dict[str, Any]:
    return {"nodes": [
        {"id": "start", "type": "start", "config": {}},
        {"id": "critic", "type": "agent",
         "config": {"provider": "codex", "prompt": "Review.", **config}},
        {"id": "end", "type": "end", "config": {}}],
        "edges": [{"id": "a", "source": "start", "target": "critic"},
                  {"id": "b", "source": "critic", "target": "end"}]}


@pytest.mark.parametrize(("config", "code"), [
    ({"role": "boss"}, "unknown_role"),
    ({"role": "<img src=x onerror=alert(1)>"}, "unknown_role"),
    ({"system_prompt": "x" * 40_000}, "system_prompt_too_long"),
    ({"models": []}, "invalid_models"),
    ({"models": ["gemini"]}, "invalid_models"),
    ({"models": ["codex", "codex"]}, "invalid_models"),
    ({"mcp_servers": ["a", "a"]}, "duplicate_mcp_server"),
    ({"role": 7}, "invalid_config"),
    ({"mcp_servers": "a"}, "invalid_config"),
])
def test_a_bad_agent_field_is_refused_with_the_node_named(config: dict[str, Any],
                                                          code: str) -> None:
    with pytest.raises(FlowchartValidationError) as refused:
        parse_graph(_graph(**config))
    problems = refused.value.to_json()
    assert [(p["code"], p["node_id"]) for p in problems] == [(code, "critic")]
    assert "x" * 200 not in json.dumps(problems)


def test_good_agent_fields_parse_and_build_the_profile() -> None:
    graph = parse_graph(_graph(role="reviewer", system_prompt="Be strict.",
                               mcp_servers=["docs"], models=["codex:gpt-5.1", "claude"]))
    profile = AgentConfig.model_validate(graph.node("critic").config).profile()
    assert profile.role == "reviewer" and profile.mcp_servers == ("docs",)
    assert [m.label() for m in profile.models] == ["codex:gpt-5.1", "claude"]
    stored = graph.model_dump(mode="json", by_alias=True)
    assert stored["nodes"][1]["config"]["models"] == ["codex:gpt-5.1", "claude"]
