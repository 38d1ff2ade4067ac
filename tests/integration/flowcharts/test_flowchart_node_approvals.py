"""Approval gates on a flowchart's repository node (in process, on SQLite and PostgreSQL): a
``require`` rule makes the node wait (its execution ``awaiting_approval`` with one pending
approval, no lease held, the node still running and shown waiting, the run neither failed nor
finished, the next node not started); the decision dispatches the node again, once, through its
node task (never as a standalone execution): approved, the command runs; denied, the model gets
``permission_denied``; either way the node succeeds and the run goes on to the next node. A
decision made without a node dispatch (the CLI without a broker) or a run cancelled while its
node waits is picked up by the reaper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.db.approvals import ApprovalRepository
from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.db.leases import LeaseStore
from services.db.session import Database, open_database
from services.flowcharts.graph import parse_graph
from services.flowcharts.service import FlowchartRunService
from services.runs.approvals import decide_approval, reap_approvals
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, edges, final, node
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.support.redaction import settings_redactor
from tests.support.settings import studio_settings

MARK = ["sh", "-c", "echo ran > gated.txt"]
SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run", "args": {"argv": MARK}}]},
    {"tool_calls": [{"tool": "workspace.edit_file",
                     "args": {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}}]},
    {"final": DONE},
]}
Sent = list[tuple[str, str]]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        yield world


@pytest.fixture
def database(world: RepoWorld, db_url: str) -> Iterator[tuple[Database, StudioSettings]]:
    settings = studio_settings(world.root / "data", database_url=db_url,
                               github_token=TOKEN,
                               github_api_url=world.api.api_url,
                               github_git_origins=[world.host.base_url],
                               repo_allowed_hosts=["127.0.0.1"],
                               workspace_dir=world.root / "workspaces")
    db = open_database(settings)
    yield db, settings
    db.dispose()


def _start(db: Database, service: FlowchartRunService, world: RepoWorld) -> str:
    graph = {"nodes": [
        node("start", "start"),
        node("fix", "agent", **agent("Fix add", SCRIPT, repo_url=world.url, pull_request=False,
                                     approval_policy={"command.run": "require"})),
        node("after", "agent", **agent("Report: {{ nodes.fix.result.summary }}",
                                       final("success", "reported"))),
        node("end", "end")],
        "edges": edges(("start", "fix"), ("fix", "after"), ("after", "end"))}
    stored = parse_graph(graph).model_dump(mode="json")
    return service.start(FlowchartRepository(db).create(name="gated", graph=stored))


def _waiting(db: Database, service: FlowchartRunService, run_id: str) -> tuple[str, str]:
    """Run the node's task: it waits; answers its execution and its pending approval."""
    service.run_node(run_id, "fix")
    run = service.get(run_id)
    assert run["status"] == "running", run
    fix = run["nodes"]["fix"]
    assert fix["state"] == "running" and fix["awaiting_approval"] is True, fix
    assert run["nodes"]["after"]["state"] == "pending"
    execution_id = fix["execution_id"]
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "awaiting_approval"
    assert row.lease_owner is None and row.flowchart_run_id == run_id
    (approval,) = ApprovalRepository(db).of_execution(execution_id)
    assert approval["status"] == "pending" and approval["args"]["argv"] == MARK
    # a task delivered again while it waits leaves it waiting (no new attempt)
    epoch = ExecutionRepository(db).get(execution_id).lease_epoch  # type: ignore[union-attr]
    service.run_node(run_id, "fix")
    again = ExecutionRepository(db).get(execution_id)
    assert again is not None and (again.status, again.lease_epoch) == ("awaiting_approval", epoch)
    assert len(ApprovalRepository(db).of_execution(execution_id)) == 1
    # the node's runner ending now (its child process, say) does not fail the waiting node
    service.fail_unfinished(run_id, "fix", "its child ended")
    assert service.get(run_id)["nodes"]["fix"]["state"] == "running"
    assert ExecutionRepository(db).get(execution_id).status == "awaiting_approval"  # type: ignore[union-attr]
    return execution_id, str(approval["id"])


def _finish(db: Database, service: FlowchartRunService, run_id: str, sent: Sent) -> dict[str, Any]:
    """Run the node tasks sent, in order, until the run ends."""
    ran = 0
    while ran < len(sent):
        service.run_node(*sent[ran])
        ran += 1
    return service.get(run_id)


def _command_result(db: Database, execution_id: str) -> dict[str, Any]:
    found = [e.data for e in ExecutionRepository(db).events(execution_id)
             if e.kind == "tool_result" and e.data["call"]["domain"] == "command"]
    assert len(found) == 1, found
    return dict(found[0])


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_repository_node_waits_for_its_approval_then_the_run_goes_on(
        world: RepoWorld, database: tuple[Database, StudioSettings], decision: str) -> None:
    db, settings = database
    sent: Sent = []
    service = FlowchartRunService(db, settings, dispatch=lambda r, n: sent.append((r, n)))
    run_id = _start(db, service, world)
    assert sent == [(run_id, "fix")]
    execution_id, approval_id = _waiting(db, service, run_id)
    assert sent == [(run_id, "fix")]  # nothing else started meanwhile

    standalone: list[str] = []
    decided = decide_approval(db, execution_id, approval_id, decision, by="alice",
                              reason="<b>looked at it</b>", dispatch=standalone.append,
                              dispatch_node=lambda r, n: sent.append((r, n)),
                              redactor=settings_redactor())
    assert decided.resume and standalone == [] and sent == [(run_id, "fix")] * 2
    # handed out once: neither a reaper nor the unclaimed sweep sends it again
    assert reap_approvals(db, standalone.append,
                          dispatch_node=lambda r, n: sent.append((r, n))) == []
    assert execution_id not in LeaseStore(db).unclaimed(older_than_s=0)
    assert standalone == [] and len(sent) == 2

    del sent[0]  # the first task already ran
    done = _finish(db, service, run_id, sent)
    assert done["status"] == "succeeded", done
    assert [done["nodes"][n]["state"] for n in ("fix", "after")] == ["succeeded", "succeeded"]
    assert done["nodes"]["fix"]["awaiting_approval"] is False
    assert sent == [(run_id, "fix"), (run_id, "after")]
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "succeeded" and row.branch is not None
    result = _command_result(db, execution_id)
    assert result["approval"]["decision"] == decision
    assert result["approval"]["decided_by"] == "alice"
    kinds = [e.kind for e in ExecutionRepository(db).events(execution_id)]
    assert kinds.count("approval_requested") == 1 and kinds.count("approval_decided") == 1
    assert kinds.count("finished") == 1
    if decision == "approve":
        assert result["envelope"]["ok"] is True
        assert world.remote_file(row.branch, "gated.txt") == "ran\n"
    else:
        assert result["envelope"]["error"]["code"] == "permission_denied"
        assert "looked at it" in result["envelope"]["error"]["message"]
        assert world.remote_file(row.branch, "gated.txt") is None
    assert "a + b" in (world.remote_file(row.branch, "calc.py") or "")


def test_a_decision_without_a_node_dispatch_and_a_cancel_while_waiting_reach_the_reaper(
        world: RepoWorld, database: tuple[Database, StudioSettings]) -> None:
    db, settings = database
    sent: Sent = []
    service = FlowchartRunService(db, settings, dispatch=lambda r, n: sent.append((r, n)))
    decided_run = _start(db, service, world)
    decided_execution, approval_id = _waiting(db, service, decided_run)
    cancelled_run = _start(db, service, world)
    cancelled_execution, _ = _waiting(db, service, cancelled_run)
    sent.clear()

    standalone: list[str] = []
    # as the CLI without a broker: no node dispatch; the execution is never sent standalone
    decided = decide_approval(db, decided_execution, approval_id, "approve", by="cli:bob",
                              reason=None, dispatch=standalone.append, redactor=settings_redactor())
    assert decided.resume and standalone == [] and sent == []
    assert service.cancel(cancelled_run)["status"] == "cancelled"

    reaped = reap_approvals(db, standalone.append,
                            dispatch_node=lambda r, n: sent.append((r, n)))
    assert sorted(reaped) == sorted([decided_execution, cancelled_execution])
    assert standalone == [] and sorted(sent) == sorted([(decided_run, "fix"),
                                                        (cancelled_run, "fix")])
    assert reap_approvals(db, standalone.append,
                          dispatch_node=lambda r, n: sent.append((r, n))) == []  # once

    for run_id, node_id in list(sent):
        service.run_node(run_id, node_id)
    cancelled = ExecutionRepository(db).get(cancelled_execution)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert service.get(cancelled_run)["nodes"]["fix"]["state"] == "cancelled"
    done = _finish(db, service, decided_run, [s for s in sent if s[0] == decided_run])
    assert done["status"] == "succeeded", done
    assert done["nodes"]["after"]["state"] == "succeeded"
