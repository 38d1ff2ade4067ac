"""Approval gates on the durable path, in this process (``execute_execution``), on SQLite and
PostgreSQL: a ``require`` rule pauses the execution before the call (``awaiting_approval``, no
lease held, one pending approval journalled), a decision queues it again and the resumed attempt
runs the call (approved) or answers it ``permission_denied`` with the reason (denied, timed out)
without asking the model again; a ``deny`` rule refuses without pausing. Every decision is on
the call's record and in the journal.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import update

from services.db.approvals import ApprovalRepository
from services.db.base import utcnow
from services.db.executions import ExecutionRepository
from services.db.leases import LeaseStore
from services.db.models import ToolApproval
from services.db.redaction import Redactor
from services.db.session import Database, open_database
from services.execution.errors import ErrorCode, ExecutionError
from services.runs.approvals import decide_approval, reap_approvals
from services.runs.durable import execute_execution
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings
from tests.integration.repo_env import DONE, RepoWorld, repo_world
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

MARK = ["sh", "-c", "echo ran >> gated.txt"]
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [
        {"tool": "workspace.write_file", "args": {"path": "notes.txt", "content": "n\n"}},
        {"tool": "command.run", "args": {"argv": MARK}}]},
    {"tool_calls": [{"tool": "workspace.edit_file",
                     "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
    {"final": DONE},
]}


@pytest.fixture
def world(tmp_path: Path) -> Any:
    with repo_world(tmp_path) as world:
        yield world


def _settings(world: RepoWorld, db_url: str) -> StudioSettings:
    return studio_settings(world.root / "data", database_url=db_url,
                           github_token="ghs_RepoWorkflowSECRET0123456789abcdef",
                           github_api_url=world.api.api_url,
                           github_git_origins=[world.host.base_url],
                           repo_allowed_hosts=["127.0.0.1"],
                           workspace_dir=world.root / "workspaces")


def _create(db: Database, settings: StudioSettings, world: RepoWorld,
            policy: dict[str, str]) -> str:
    return create_execution(db, ExecutionRequest(
        provider="replay", prompt="Fix add", repo_url=world.url, script=SCRIPT,
        pull_request=False, approval_policy=policy), Redactor(), settings=settings)


def _events(db: Database, execution_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [(e.kind, dict(e.data)) for e in ExecutionRepository(db).events(execution_id)]


def _result_of(events: list[tuple[str, dict[str, Any]]], operation: str) -> dict[str, Any]:
    found = [d for k, d in events if k == "tool_result"
             and d["call"]["operation"] == operation and d["call"]["domain"] == "command"]
    assert len(found) == 1, found
    return found[0]


def _gated_file(db: Database, world: RepoWorld, execution_id: str) -> str | None:
    """What the gated command wrote (``gated.txt``), as the execution left it: the workspace is
    gone once the execution ends, its work is on the pushed branch (``None``: no such file)."""
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.branch, row
    assert world.remote_file(row.branch, "notes.txt") == "n\n"  # the work before it was pushed
    return world.remote_file(row.branch, "gated.txt")


def _pause(db: Database, settings: StudioSettings, execution_id: str) -> dict[str, Any]:
    outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.state == "awaiting_approval", outcome
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "awaiting_approval"
    assert row.lease_owner is None and row.lease_expires_at is None  # no lease while waiting
    pending = ApprovalRepository(db).of_execution(execution_id)
    assert [a["status"] for a in pending] == ["pending"]
    requested = [d for k, d in _events(db, execution_id) if k == "approval_requested"]
    assert [d["approval_id"] for d in requested] == [pending[0]["id"]]
    assert requested[0]["call"]["args"]["argv"] == MARK
    assert not [k for k, _ in _events(db, execution_id) if k == "finished"]
    return pending[0]


@pytest.fixture
def database(world: RepoWorld, db_url: str) -> Any:
    settings = _settings(world, db_url)
    db = open_database(settings)
    yield db, settings
    db.dispose()


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_required_call_waits_then_runs_or_is_denied_without_asking_the_model_again(
        world: RepoWorld, database: tuple[Database, StudioSettings], decision: str) -> None:
    db, settings = database
    execution_id = _create(db, settings, world, {"command.run": "require"})
    approval = _pause(db, settings, execution_id)
    dispatched: list[str] = []
    decided = decide_approval(db, execution_id, approval["id"], decision, by="alice",
                              reason="<b>looked at it</b>", dispatch=dispatched.append,
                              redactor=settings_redactor())
    assert decided.changed and decided.resume and dispatched == [execution_id]
    assert ExecutionRepository(db).get(execution_id).status == "queued"  # type: ignore[union-attr]
    # should the dispatch be lost, the reaper sends it again (queued, no lease holder)
    LeaseStore(db).mark_dispatched(execution_id)
    assert execution_id in LeaseStore(db).unclaimed(older_than_s=0)

    outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "succeeded", outcome
    events = _events(db, execution_id)
    kinds = [k for k, _ in events]
    assert kinds.count("finished") == 1 and kinds.count("approval_requested") == 1
    # the model was asked once per turn: the paused turn's calls were replayed from the journal
    assert kinds.count("model_response") == 3
    written = [d for k, d in events if k == "tool_call"
               and d["call"]["operation"] == "write_file"]
    assert len(written) == 1  # the call before the gated one did not run again
    results = [d for k, d in events if k == "tool_result"]
    assert [(d["envelope"]["operation"], d["envelope"]["ok"]) for d in results] == [
        ("write_file", True), ("run", decision == "approve"), ("edit_file", True)]
    ids = [d["call"]["call_id"] for d in results]
    assert len(set(ids)) == 3, ids  # the turn after the paused one is a new cycle
    result = _result_of(events, "run")
    assert result["approval"]["decision"] == decision
    assert result["approval"]["decided_by"] == "alice"
    decisions = [d for k, d in events if k == "approval_decided"]
    assert [(d["decision"], d["decided_by"], d["reason"]) for d in decisions] == [
        (decision, "alice", "<b>looked at it</b>")]
    record = {c.call_id: c for c in ExecutionRepository(db).tool_calls(execution_id)}[
        result["call"]["call_id"]]
    assert record.approval is not None and record.approval["decision"] == decision
    assert record.approval["reason"] == "<b>looked at it</b>"
    gated = _gated_file(db, world, execution_id)
    if decision == "approve":  # the control of the witness below: the command ran, it wrote
        assert result["envelope"]["ok"] is True
        assert record.ok is True
        assert gated == "ran\n"
    else:
        assert gated is None  # the witness: the denied command never ran
        assert result["envelope"]["error"]["code"] == ErrorCode.PERMISSION_DENIED.value
        assert "looked at it" in result["envelope"]["error"]["message"]
        assert record.error_code == "permission_denied"


def test_a_timed_out_approval_counts_as_denied(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    execution_id = _create(db, settings, world, {"command.*": "require"})
    approval = _pause(db, settings, execution_id)
    dispatched: list[str] = []
    assert reap_approvals(db, dispatched.append) == []  # not yet due
    with db.session() as session:
        session.execute(update(ToolApproval).where(ToolApproval.id == approval["id"])
                        .values(expires_at=utcnow() - timedelta(seconds=1)))
    assert reap_approvals(db, dispatched.append) == [execution_id]
    assert dispatched == [execution_id]
    outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "succeeded", outcome
    result = _result_of(_events(db, execution_id), "run")
    assert result["envelope"]["error"]["code"] == "permission_denied"
    assert result["approval"]["decided_by"] == "timeout"
    assert _gated_file(db, world, execution_id) is None


def test_hostile_decisions(world: RepoWorld,
                           database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    execution_id = _create(db, settings, world, {"command.run": "require"})
    other = _create(db, settings, world, {"command.run": "require"})
    approval = _pause(db, settings, execution_id)
    with pytest.raises(ExecutionError) as unknown:
        decide_approval(db, other, approval["id"], "approve", by="eve", reason=None,
                        dispatch=None, redactor=settings_redactor())
    assert unknown.value.code is ErrorCode.APPROVAL_NOT_FOUND
    first = decide_approval(db, execution_id, approval["id"], "deny", by="bob", reason="no",
                            dispatch=None, redactor=settings_redactor())
    again = decide_approval(db, execution_id, approval["id"], "deny", by="bob", reason="no",
                            dispatch=None, redactor=settings_redactor())
    assert first.changed and not again.changed and not again.resume
    with pytest.raises(ExecutionError) as conflict:
        decide_approval(db, execution_id, approval["id"], "approve", by="eve", reason=None,
                        dispatch=None, redactor=settings_redactor())
    assert conflict.value.code is ErrorCode.APPROVAL_ALREADY_DECIDED
    kinds = [k for k, _ in _events(db, execution_id)]
    assert kinds.count("approval_decided") == 1


def test_a_deny_rule_refuses_without_pausing(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    execution_id = _create(db, settings, world, {"command.*": "deny", "workspace.*": "allow"})
    outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "succeeded", outcome
    events = _events(db, execution_id)
    result = _result_of(events, "run")
    assert result["envelope"]["error"]["code"] == "permission_denied"
    assert result["approval"]["rule"] == "command.*"
    assert [d["decided_by"] for k, d in events if k == "approval_decided"] == ["policy"]
    assert ApprovalRepository(db).of_execution(execution_id) == []
    assert _gated_file(db, world, execution_id) is None  # the denied command never ran


def test_control_an_allow_rule_runs_the_same_command_and_writes_the_gated_file(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    """The control of the deny rule's witness: the same script allowed writes ``gated.txt``
    where the deny test looks for it."""
    db, settings = database
    execution_id = _create(db, settings, world, {"command.*": "allow", "workspace.*": "allow"})
    outcome = execute_execution(execution_id, settings=settings, db=db)
    assert outcome.status == "succeeded", outcome
    assert _result_of(_events(db, execution_id), "run")["envelope"]["ok"] is True
    assert _gated_file(db, world, execution_id) == "ran\n"


def test_a_new_session_gets_the_decision_made_for_the_same_call_once(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    """A self-driving engine (claude) starts a new session on resume: the same call (tool and
    arguments) under a new id gets the decision made for it, once."""
    from services.execution.approvals import GateAction, parse_policy
    from services.execution.messages import ToolCall
    from services.runs.approvals import DbApprovalGate

    db, settings = database
    execution_id = _create(db, settings, world, {"command.run": "require"})
    gate = DbApprovalGate(parse_policy({"command.run": "require"}), db, execution_id,
                          timeout_s=60, redactor=settings_redactor())

    def call(call_id: str) -> ToolCall:
        return ToolCall(call_id=call_id, tool_name="command_run", domain="command",
                        operation="run", args={"argv": MARK})

    first = gate.review(call("toolu_1"))
    assert first.action is GateAction.PAUSE and first.approval_id
    assert gate.review(call("toolu_1")).approval_id == first.approval_id  # asked once
    decide_approval(db, execution_id, first.approval_id, "approve", by="carol", reason=None,
                    dispatch=None, redactor=settings_redactor())
    again = gate.review(call("toolu_2"))  # the new session's id for the same call
    assert again.action is GateAction.RUN and again.approval_id == first.approval_id
    third = gate.review(call("toolu_3"))  # a decision is used once
    assert third.action is GateAction.PAUSE and third.approval_id != first.approval_id
    other = gate.review(ToolCall(call_id="toolu_4", tool_name="command_run", domain="command",
                                 operation="run", args={"argv": ["true"]}))
    assert other.action is GateAction.PAUSE


def test_a_decision_during_the_pause_and_a_cancel_while_waiting_are_picked_up_by_the_reaper(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    from services.db.models import NodeExecution

    db, settings = database
    early = _create(db, settings, world, {"command.run": "require"})
    approval = _pause(db, settings, early)
    with db.session() as session:  # as if the decision came before the attempt had paused
        session.execute(update(NodeExecution).where(NodeExecution.id == early)
                        .values(status="running"))
    decided = decide_approval(db, early, approval["id"], "approve", by="dan", reason=None,
                              dispatch=None, redactor=settings_redactor())
    assert decided.changed and not decided.resume
    with db.session() as session:
        session.execute(update(NodeExecution).where(NodeExecution.id == early)
                        .values(status="awaiting_approval"))
    cancelled = _create(db, settings, world, {"command.run": "require"})
    _pause(db, settings, cancelled)
    ExecutionRepository(db).request_cancel(cancelled)
    dispatched: list[str] = []
    assert sorted(reap_approvals(db, dispatched.append)) == sorted([early, cancelled])
    assert execute_execution(early, settings=settings, db=db).status == "succeeded"
    assert execute_execution(cancelled, settings=settings, db=db).status == "cancelled"


def test_a_secret_in_a_reason_is_stored_redacted(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    secret = "ghs_RepoWorkflowSECRET0123456789abcdef"  # the world's GitHub token
    execution_id = _create(db, settings, world, {"command.run": "require"})
    approval = _pause(db, settings, execution_id)
    decide_approval(db, execution_id, approval["id"], "deny", by="erin",
                    reason=f"token {secret} leaked", dispatch=None,
                    redactor=Redactor.from_settings(settings))
    stored = ApprovalRepository(db).get(execution_id, approval["id"])
    assert secret not in str(stored) and "leaked" in str(stored["reason"])
    assert secret not in str(_events(db, execution_id))
    assert secret not in str([c.approval for c in ExecutionRepository(db).tool_calls(
        execution_id)])


_HELD_WHILE_WAITING = {
    # a row turned awaiting_approval while a lease holder is still on it: noted in a table
    "sqlite": [
        "CREATE TABLE held_while_waiting (execution_id TEXT)",
        "CREATE TRIGGER note_held AFTER UPDATE ON node_executions "
        "WHEN NEW.status = 'awaiting_approval' AND NEW.lease_owner IS NOT NULL "
        "BEGIN INSERT INTO held_while_waiting VALUES (NEW.id); END"],
    "postgresql": [
        "CREATE TABLE held_while_waiting (execution_id text)",
        "CREATE FUNCTION note_held() RETURNS trigger AS $$ BEGIN "
        "INSERT INTO held_while_waiting VALUES (NEW.id::text); RETURN NEW; END $$ "
        "LANGUAGE plpgsql",
        "CREATE TRIGGER note_held AFTER UPDATE ON node_executions FOR EACH ROW "
        "WHEN (NEW.status = 'awaiting_approval' AND NEW.lease_owner IS NOT NULL) "
        "EXECUTE FUNCTION note_held()"],
}


def test_an_execution_is_never_awaiting_approval_while_its_lease_is_held(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    """A decision is taken as soon as the execution is ``awaiting_approval``; were the pausing
    attempt still holding the lease then (its workspace being released), the resumed attempt's
    claim would fail and the execution would sit queued until ``queued_timeout_s``. So the status
    comes with the lease's release, in one statement (a trigger of the real database notes any
    row that is ever both)."""
    from sqlalchemy import text

    db, settings = database
    with db.session() as session:
        for statement in _HELD_WHILE_WAITING[session.get_bind().dialect.name]:
            session.execute(text(statement))
    execution_id = _create(db, settings, world, {"command.run": "require"})
    approval = _pause(db, settings, execution_id)
    with db.session() as session:
        held = session.execute(text("SELECT execution_id FROM held_while_waiting")).all()
    assert held == []
    dispatched: list[str] = []
    decided = decide_approval(db, execution_id, approval["id"], "approve", by="erin",
                              reason=None, dispatch=dispatched.append, redactor=settings_redactor())
    assert decided.resume and dispatched == [execution_id]
    assert execute_execution(execution_id, settings=settings, db=db).status == "succeeded"
