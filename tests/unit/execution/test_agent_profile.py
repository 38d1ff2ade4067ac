"""The agent profile's checks (hostile values), the roles' tool subsets, the system prompt's
order, the fallback helpers and the price overrides."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from services.execution.agent_profile import (
    SYSTEM_PROMPT_MAX_CHARS,
    AgentProfile,
    ModelChoice,
    ProfileError,
    primary_model,
)
from services.execution.fallback import (
    DIGEST_MAX_CHARS,
    conversation_digest,
    resume_position,
    session_prompt,
)
from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolResultPart,
    ToolSchema,
    Usage,
)
from services.execution.pricing import PriceTable
from services.execution.profile_checks import agent_profile
from services.execution.prompts import system_prompt
from services.execution.roles import ROLES, restrict, role_prompt, role_specs
from services.execution.tool_domains.registry import default_registry
from services.execution.tool_domains.spec import ToolArgs, ToolSpec
from services.settings import StudioSettings


def _code(**fields: Any) -> str:
    provider = fields.pop("provider", "codex")
    model = fields.pop("model", None)
    with pytest.raises(ProfileError) as refused:
        agent_profile(provider, model, **fields)
    return refused.value.code


# -- hostile values ---------------------------------------------------------------------------

@pytest.mark.parametrize("role", ["admin", "", "Reviewer", "reviewer ", "<b>x</b>", "x" * 10_000])
def test_an_unknown_role_is_refused_without_echoing_it_whole(role: str) -> None:
    with pytest.raises(ProfileError) as refused:
        agent_profile("codex", None, role=role)
    assert refused.value.code == "unknown_role"
    assert "implementer, reviewer, tester" in refused.value.message
    assert len(refused.value.message) < 200


def test_the_system_prompt_is_capped_and_has_no_nul() -> None:
    ok = agent_profile("codex", None, system_prompt="x" * SYSTEM_PROMPT_MAX_CHARS)
    assert len(ok.system_prompt) == SYSTEM_PROMPT_MAX_CHARS
    assert _code(system_prompt="x" * (SYSTEM_PROMPT_MAX_CHARS + 1)) == "system_prompt_too_long"
    assert _code(system_prompt="a\x00b") == "invalid_system_prompt"


@pytest.mark.parametrize(("names", "code"), [
    (["a", "a"], "duplicate_mcp_server"),
    (["bad name"], "invalid_mcp_servers"),
    (["x" * 21], "invalid_mcp_servers"),
    ([""], "invalid_mcp_servers"),
    ([f"s{i}" for i in range(21)], "invalid_mcp_servers"),
    ([7], "invalid_mcp_servers"),
])
def test_hostile_server_lists(names: list[Any], code: str) -> None:
    assert _code(mcp_servers=names) == code


@pytest.mark.parametrize("models", [
    [], ["nope"], ["codex:"], ["codex: "], [f"codex:{'m' * 201}"], [None], [7], [["codex"]],
    [{"provider": "codex", "model": 3}], [{"model": "x"}], [{"provider": "codex", "x": 1}],
    ["codex", "codex"], ["codex"] * 6, "codex", ["gemini"], ["codex:other-model"],
])
def test_hostile_model_lists(models: Any) -> None:
    assert _code(model="gpt-5.1", models=models) == "invalid_models"


def test_models_take_both_forms_and_the_first_is_the_execution_s_own() -> None:
    profile = agent_profile("codex", None, models=[
        "codex:gpt-5.1", {"provider": "gemini"}, ModelChoice("claude", "claude-sonnet-4-5")])
    assert [m.label() for m in profile.models] == [
        "codex:gpt-5.1", "gemini", "claude:claude-sonnet-4-5"]
    assert primary_model(profile) == "gpt-5.1"
    assert profile.chain("codex", "gpt-5.1") == profile.models
    assert AgentProfile().chain("codex", "m") == (ModelChoice("codex", "m"),)
    assert AgentProfile.from_stored(json.loads(json.dumps(profile.stored()))) == profile
    assert AgentProfile.from_stored(None) == AgentProfile()


# -- roles --------------------------------------------------------------------------------------

def _mcp_spec(read_only: bool) -> ToolSpec:
    return ToolSpec(domain="mcp", operation=f"srv__{'look' if read_only else 'poke'}",
                    description="d", args_model=ToolArgs, handler=lambda a, c: {},
                    mutates=not read_only, parameters={"type": "object", "properties": {}})


def test_a_reviewer_gets_exactly_the_operations_that_change_nothing() -> None:
    specs = [*default_registry().specs(), _mcp_spec(True), _mcp_spec(False)]
    reviewer = {s.name for s in role_specs("reviewer", specs)}
    assert reviewer == {s.name for s in specs if not s.mutates}
    for name in ("workspace_write_file", "workspace_edit_file", "workspace_apply_patch",
                 "workspace_delete", "command_run", "git_commit", "git_push"):
        assert name not in reviewer
    assert {"workspace_read_file", "git_status", "git_diff", "mcp__srv__look"} <= reviewer
    assert "mcp__srv__poke" not in reviewer


def test_a_tester_adds_the_commands_and_an_implementer_gets_all() -> None:
    specs = default_registry().specs()
    tester = {s.name for s in role_specs("tester", specs)}
    assert tester == {s.name for s in specs if not s.mutates} | {"command_run"}
    assert {s.name for s in role_specs("implementer", specs)} == {s.name for s in specs}
    assert role_specs(None, specs) == specs


def test_the_restricted_registry_answers_only_the_role_s_tools() -> None:
    registry = restrict(default_registry(), "reviewer")
    assert registry.get("workspace_write_file") is None
    assert registry.get("workspace.read_file") is not None
    full = default_registry()
    assert restrict(full, None) is full


def test_every_role_is_documented() -> None:
    from pathlib import Path

    docs = (Path(__file__).parents[3] / "docs" / "sphinx" / "agents.rst").read_text()
    for name, role in ROLES.items():
        assert f"``{name}``" in docs
        # the prompt is documented word for word (the rst wraps it)
        assert " ".join(role.prompt.removeprefix(f"Your role: {name}. ").split()).replace(
            "`", "") in " ".join(docs.split()).replace("`", "")


def test_the_system_prompt_puts_role_then_tools_then_node_then_repository() -> None:
    tools = [ToolSchema(name="workspace_read_file", description="Read.", parameters={})]
    text = system_prompt("repository work", tools, "## AGENTS.md\n\nREPO-RULE",
                         role_prompt=role_prompt("reviewer"), node_prompt="NODE-RULE")
    order = [text.index(part) for part in (
        "Your role: reviewer", "Tools:\n- workspace_read_file", "NODE-RULE",
        "When the work is done", "REPO-RULE")]
    assert order == sorted(order)
    plain = system_prompt("repository work", tools, "")
    assert "Your role" not in plain and "from its author" not in plain


# -- fallback helpers -----------------------------------------------------------------------------

def _conversation(steps: int, size: int = 10) -> list[Message]:
    messages = [Message(role=Role.USER, parts=[TextPart(text="THE TASK")])]
    for i in range(steps):
        call = ToolCall(call_id=f"c{i}", tool_name="workspace_read_file", domain="workspace",
                        operation="read_file", args={"path": f"f{i}.txt"})
        messages.append(Message(role=Role.ASSISTANT, parts=[ToolCallPart(call=call)]))
        messages.append(Message(role=Role.TOOL, parts=[ToolResultPart(
            call_id=f"c{i}", tool_name=call.tool_name,
            envelope={"ok": True, "result": {"content": "y" * size}})]))
    return messages


def test_the_digest_keeps_the_latest_steps_within_its_cap() -> None:
    assert session_prompt("THE TASK", _conversation(0)) == "THE TASK"
    prompt = session_prompt("THE TASK", _conversation(2))
    assert prompt.startswith("THE TASK\n\nAnother model") and "[tool call c1]" in prompt
    digest = conversation_digest(_conversation(100, size=3000))
    assert len(digest) <= DIGEST_MAX_CHARS + 100
    assert digest.startswith("[... earlier steps left out ...]") and "c99" in digest
    assert "[tool call c0]" not in digest


def test_a_resume_starts_after_the_last_recorded_fallback() -> None:
    chain = (ModelChoice("codex"), ModelChoice("gemini"), ModelChoice("claude"))
    assert resume_position(chain, []) == 0
    events = [("started", {}), ("model_fallback", {"position": 1}),
              ("model_fallback", {"position": 2})]
    assert resume_position(chain, events) == 2
    assert resume_position(chain, [("model_fallback", {"position": 9})]) == 2
    assert resume_position(chain, [("model_fallback", {"position": "x"})]) == 0


# -- price overrides ------------------------------------------------------------------------------

def test_an_override_wins_over_the_list_price_and_a_reported_cost() -> None:
    table = PriceTable({"claude-sonnet-4-5": {"input": 1.0, "output": 2.0},
                        "mine": {"input": 0, "output": 0}})
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000, cost_usd=99.0)
    assert table.cost("claude-sonnet-4-5-20250929", usage) == (3.0, True)
    assert table.cost("gpt-5.1", usage) == (99.0, True)  # no override: the reported cost
    assert table.describe("claude-sonnet-4-5-20250929") == {
        "entry": "claude-sonnet-4-5", "input": 1.0, "output": 2.0, "cached_input": None,
        "cache_write": None, "source": "override"}
    assert table.describe("gpt-5.1")["source"] == "list"  # type: ignore[index]
    assert table.describe("unknown-model") is None
    assert table.overridden("mine") and not table.overridden("gpt-5.1")


@pytest.mark.parametrize("value", [
    "not json", "[]", '{"m": 1}', '{"m": {"input": 1}}', '{"m": {"input": -1, "output": 1}}',
    '{"m": {"input": 1, "output": 1e9}}', '{"m": {"input": true, "output": 1}}',
    '{"m": {"input": 1, "output": 1, "extra": 1}}', '{"": {"input": 1, "output": 1}}',
])
def test_hostile_price_overrides_refuse_the_settings(value: str) -> None:
    with pytest.raises(ValidationError):
        StudioSettings(model_prices=value)


def test_price_overrides_parse_from_the_environment_form() -> None:
    settings = StudioSettings(model_prices='{"GPT-5.1": {"input": 1, "output": 2}}')
    assert settings.model_prices == {"gpt-5.1": {"input": 1.0, "output": 2.0}}
    assert StudioSettings(model_prices="").model_prices == {}
