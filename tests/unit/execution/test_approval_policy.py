"""Approval policies: validation with stable codes, precedence, and the gate in the shared tool
runner (the claude tool gateway included): a denied call never runs, a required call pauses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from services.execution.approvals import (
    ApprovalGate,
    ApprovalPolicy,
    GateAction,
    GateVerdict,
    PauseRun,
    Rule,
    call_fingerprint,
    parse_policy,
)
from services.execution.errors import ConfigError, ErrorCode
from services.execution.guards import LoopDetector
from services.execution.messages import ToolCall
from services.execution.ports import AgentEvent, SessionOutcome
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from services.execution.tool_gateway import LoopToolGateway
from services.execution.tool_runner import ToolRunner


@pytest.mark.parametrize("raw", [
    [], "command.run", 3, {"command.run": "maybe"}, {"command.run": True},
    {"command.run": None}, {"nope.run": "deny"}, {"command.nope": "deny"}, {"command": "deny"},
    {"": "deny"}, {".run": "deny"}, {"command.run.extra": "deny"}, {"x" * 500: "deny"},
    {"mcp.<b>x</b>": "deny"}, {f"mcp.s__{i}": "deny" for i in range(201)},
    {"workspace.read_file": "ALLOW"},
])
def test_hostile_policies_are_refused_with_a_stable_code(raw: Any) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_policy(raw)
    assert refused.value.code is ErrorCode.INVALID_APPROVAL_POLICY


def test_the_most_specific_key_wins_and_the_default_is_allow() -> None:
    policy = parse_policy({"*": "deny", "git.*": "require", "git.status": "allow",
                           "mcp.*": "require", "mcp.docs__search": "allow"})
    assert policy.rule_for("git", "status") == ("git.status", Rule.ALLOW)
    assert policy.rule_for("git", "push") == ("git.*", Rule.REQUIRE)
    assert policy.rule_for("command", "run") == ("*", Rule.DENY)
    assert policy.rule_for("mcp", "docs__search") == ("mcp.docs__search", Rule.ALLOW)
    assert policy.rule_for("mcp", "other__tool") == ("mcp.*", Rule.REQUIRE)
    assert ApprovalPolicy().rule_for("command", "run") == (None, Rule.ALLOW)
    assert parse_policy(None) == ApprovalPolicy() and not parse_policy({})
    assert parse_policy({"command.run": "deny"}).as_json() == {"command.run": "deny"}


def test_a_fingerprint_is_the_tool_and_its_arguments() -> None:
    one = ToolCall(call_id="a", tool_name="command_run", domain="command", operation="run",
                   args={"argv": ["ls"], "timeout_s": 5})
    same = one.model_copy(update={"call_id": "b", "args": {"timeout_s": 5, "argv": ["ls"]}})
    other = one.model_copy(update={"args": {"argv": ["ls", "-a"]}})
    assert call_fingerprint(one) == call_fingerprint(same) != call_fingerprint(other)


class Events:
    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def emit(self, event: AgentEvent) -> None:
        self.events.append(event)

    def kinds(self) -> list[str]:
        return [e.kind.value for e in self.events]


class Pausing(ApprovalGate):
    """A gate whose ``require`` pauses (what the durable gate does with no decision yet)."""

    def require(self, call: ToolCall, key: str) -> GateVerdict:
        return GateVerdict(GateAction.PAUSE, {"approval_id": "ap-1", "rule": key})


class Engine:
    provider, model = "claude", "claude-test"
    last_outcome: SessionOutcome | None = None

    def __init__(self) -> None:
        self.interrupted = 0

    async def run_session(self, **_: Any) -> SessionOutcome:
        raise AssertionError("not started here")

    async def interrupt(self) -> None:
        self.interrupted += 1


def _runner(root: Path, policy: dict[str, str], events: Events) -> ToolRunner:
    ctx = ToolDomainContext(workspace_root=root, execution_id="exec-ap", request_id="r",
                            correlation_id="c")
    return ToolRunner(Dispatcher(default_registry()), ctx, events, LoopDetector(), "claude",
                      True, gate=Pausing(parse_policy(policy)))


def test_the_gateway_answers_a_denied_call_without_running_it(tmp_path: Path) -> None:
    events = Events()
    gateway = LoopToolGateway(_runner(tmp_path, {"workspace.*": "deny"}, events), Engine(),
                              lambda: None)
    envelope = anyio.run(gateway.call_tool, "c1", "workspace_write_file",
                         {"path": "x.txt", "content": "x"})
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "permission_denied"
    assert envelope["error"]["details"]["rule"] == "workspace.*"
    assert not (tmp_path / "x.txt").exists()
    assert events.kinds() == ["tool_call", "approval_decided", "tool_result"]
    assert events.events[-1].data["approval"]["decision"] == "deny"


def test_the_gateway_pauses_the_session_before_a_required_call(tmp_path: Path) -> None:
    events, engine = Events(), Engine()
    gateway = LoopToolGateway(_runner(tmp_path, {"command.run": "require"}, events), engine,
                              lambda: None)
    with pytest.raises(PauseRun) as paused:
        anyio.run(gateway.call_tool, "c1", "command_run", {"argv": ["touch", "ran.txt"]})
    assert paused.value.approval_id == "ap-1" and engine.interrupted == 1
    assert events.kinds() == ["approval_requested"]
    assert events.events[0].data["call"]["args"] == {"argv": ["touch", "ran.txt"]}
    with pytest.raises(PauseRun):  # a later call of the same session does not run either
        anyio.run(gateway.call_tool, "c2", "workspace_write_file",
                  {"path": "y.txt", "content": "y"})
    assert not (tmp_path / "ran.txt").exists() and not (tmp_path / "y.txt").exists()
