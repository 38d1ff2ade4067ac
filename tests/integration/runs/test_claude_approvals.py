"""The approval gate with claude, end to end through the real Claude Code CLI (bundled with
claude-agent-sdk) and the scripted Anthropic server on 127.0.0.1: the CLI's call of a
``require``d tool stops the attempt in the tool gateway before the call runs (the execution
waits, ``awaiting_approval``, no lease); after the decision a new CLI session asks for the same
call, which then runs (approved) or is answered ``permission_denied`` with the reason (denied),
and the run finishes."""

# ruff: noqa: F811  (the fixtures imported from test_approvals are the test's parameters)

from __future__ import annotations

import json
from typing import Any

import pytest

from services.db.approvals import ApprovalRepository
from services.db.redaction import Redactor
from services.db.session import Database
from services.runs.approvals import decide_approval
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from tests.integration.repo_env import DONE, RepoWorld
from tests.integration.runs.test_approvals import (  # noqa: F401  (fixtures)
    MARK,
    _events,
    _pause,
    _result_of,
    database,
    world,
)
from tests.support.model_requests import RequestRecord
from tests.support.model_script import Reply, Usage
from tests.support.model_server import ScriptedModelServer, text, tool_calls
from tests.support.redaction import settings_redactor

KEY = "sk-ant-approvals-KEY-5b8e21"
USAGE = Usage(input_tokens=100, output_tokens=20)
GATED = tool_calls([("mcp__studio__command_run", {"argv": MARK})], usage=USAGE)


def _model(record: RequestRecord) -> Reply:
    """The model asks for the gated command until it has a tool result, then answers."""
    if b'"type":"tool_result"' in record.raw_body:
        denied = b"permission_denied" in record.raw_body  # then nothing changed
        answer = {**DONE, "changes": [] if denied else ["gated.txt: marked"]}
        return text(json.dumps(answer), usage=USAGE)
    return GATED


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_claude_waits_for_the_decision_then_runs_or_is_denied(
        world: RepoWorld, database: tuple[Database, StudioSettings], decision: str,
        monkeypatch: pytest.MonkeyPatch) -> None:
    db, settings = database
    with ScriptedModelServer([_model] * 20) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        execution_id = create_execution(db, ExecutionRequest(
            provider="claude", model="claude-sonnet-4-5", prompt="Run the marked command.",
            repo_url=world.url, pull_request=False,
            approval_policy={"command.run": "require"}), Redactor(), settings=settings)
        approval = _pause(db, settings, execution_id)  # stopped before the call ran
        assert not any(k == "tool_result" for k, _ in _events(db, execution_id))
        decide_approval(db, execution_id, approval["id"], decision, by="alice",
                        reason="checked by hand", dispatch=None, redactor=settings_redactor())
        outcome = execute_execution(execution_id, settings=settings, db=db)
        sessions = len([r for r in server.requests_for("anthropic")
                        if b'"type":"tool_result"' not in r.raw_body])
    assert outcome.status == "succeeded", json.dumps(_events(db, execution_id)[-2:], default=str)
    assert sessions >= 2  # the resumed attempt is a new CLI session asking again
    events = _events(db, execution_id)
    result = _result_of(events, "run")
    envelope: dict[str, Any] = result["envelope"]
    if decision == "approve":
        assert envelope["ok"] and envelope["result"]["exit_code"] == 0
    else:
        assert envelope["error"]["code"] == "permission_denied"
        assert "checked by hand" in envelope["error"]["message"]
    decided = [d for k, d in events if k == "approval_decided"]
    assert [(d["decision"], d["decided_by"]) for d in decided] == [(decision, "alice")]
    assert [a["status"] for a in ApprovalRepository(db).of_execution(execution_id)] == [
        "approved" if decision == "approve" else "denied"]
    assert KEY not in str(events)
