"""A waiting gate notices its own expiry (issue 27, finding 8): the durable approval gate that
finds its call's approval still ``pending`` past ``expires_at`` denies it as timed out itself
(``decided_by`` ``timeout``, journalled as ``approval_decided`` like the reaper's denial) and
answers ``deny``, instead of pausing again forever. The control: before the expiry the same
review pauses."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from services.db.approvals import ApprovalRepository
from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.models import ToolApproval
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.execution.approvals import GateAction, parse_policy
from services.execution.errors import ErrorCode, ExecutionError
from services.execution.messages import ToolCall
from services.runs.approvals import DbApprovalGate, decide_approval
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from tests.integration.repo_env import DONE, RepoWorld, repo_world
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

CALL = ToolCall(call_id="toolu_1", tool_name="command_run", domain="command", operation="run",
                args={"argv": ["sh", "-c", "echo ran > gated.txt"]})


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with repo_world(tmp_path) as world:
        yield world


@pytest.fixture
def database(world: RepoWorld, db_url: str) -> Any:
    settings = studio_settings(world.root / "data", database_url=db_url,
                               repo_allowed_hosts=["127.0.0.1"],
                               workspace_dir=world.root / "workspaces")
    db = open_database(settings)
    yield db, settings
    db.dispose()


def test_a_gate_denies_its_own_expired_approval(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    execution_id = create_execution(db, ExecutionRequest(
        provider="replay", prompt="p", repo_url=world.url, pull_request=False,
        script={"turns": [{"final": DONE}]}, approval_policy={"command.run": "require"}),
        Redactor(), settings=settings)
    gate = DbApprovalGate(parse_policy({"command.run": "require"}), db, execution_id,
                          timeout_s=3600, redactor=settings_redactor())
    first = gate.review(CALL)
    assert first.action is GateAction.PAUSE and first.approval_id
    assert gate.review(CALL).action is GateAction.PAUSE  # the control: not expired, waits
    with db.session() as session:
        session.execute(update(ToolApproval).where(ToolApproval.id == first.approval_id)
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    verdict = gate.review(CALL)
    assert verdict.action is GateAction.DENY, verdict
    assert verdict.evidence is not None and verdict.evidence["decided_by"] == "timeout"
    (approval,) = ApprovalRepository(db).of_execution(execution_id)
    assert (approval["status"], approval["decided_by"]) == ("denied", "timeout")
    decided = [dict(e.data) for e in ExecutionRepository(db,
                                                         settings_redactor()).events(execution_id)
               if e.kind == "approval_decided"]
    assert [(d["decision"], d["decided_by"]) for d in decided] == [("deny", "timeout")]


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_person_deciding_after_expiry_gets_approval_expired_in_one_statement(
        world: RepoWorld, database: tuple[Database, StudioSettings], decision: str) -> None:
    db, settings = database
    execution_id = create_execution(db, ExecutionRequest(
        provider="replay", prompt="p", repo_url=world.url, pull_request=False,
        script={"turns": [{"final": DONE}]}, approval_policy={"command.run": "require"}),
        Redactor(), settings=settings)
    gate = DbApprovalGate(parse_policy({"command.run": "require"}), db, execution_id,
                          timeout_s=3600, redactor=settings_redactor())
    approval_id = gate.review(CALL).approval_id
    assert approval_id
    with db.session() as session:
        session.execute(update(ToolApproval).where(ToolApproval.id == approval_id)
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    with pytest.raises(ExecutionError) as late:
        decide_approval(db, execution_id, approval_id, decision, by="carol", reason="late",
                        dispatch=None, redactor=settings_redactor())
    assert late.value.code is ErrorCode.APPROVAL_EXPIRED
    (approval,) = ApprovalRepository(db).of_execution(execution_id)
    assert (approval["status"], approval["decided_by"], approval["reason"]) == (
        "denied", "timeout", "no decision before the approval timed out")
    with pytest.raises(ExecutionError) as again:  # and so is every later person's decision
        decide_approval(db, execution_id, approval_id, "deny", by="dave", reason=None,
                        dispatch=None, redactor=settings_redactor())
    assert again.value.code is ErrorCode.APPROVAL_EXPIRED
    decided = [dict(e.data) for e in ExecutionRepository(db,
                                                         settings_redactor()).events(execution_id)
               if e.kind == "approval_decided"]
    assert [(d["decision"], d["decided_by"]) for d in decided] == [("deny", "timeout")]
    assert gate.review(CALL).action is GateAction.DENY  # the call never runs
