"""A flowchart repository node's approval with a real ``studio worker`` on the real Redis broker:
the node's task leaves its execution ``awaiting_approval`` (the node running, the run waiting);
the decision sends ``studio.run_flowchart_node`` for the node, whose task resumes the
execution (approved: the command runs), records the node's outcome and advances the run to the
next node, also a task of the worker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import SecretStr

from services.db.approvals import ApprovalRepository
from services.db.flowcharts import FlowchartRepository
from services.db.session import open_database
from services.flowcharts.graph import parse_graph
from services.flowcharts.service import FlowchartRunService
from services.runs.approvals import decide_approval
from services.worker.flowchart_tasks import flowchart_dispatch
from services.worker.names import TASK_RUN_FLOWCHART_NODE
from tests.integration.celery_fixtures import Broker, start_worker, wait_for
from tests.integration.repo_env import DONE, repo_world
from tests.support.redaction import settings_redactor

SCRIPT: dict[str, Any] = {"turns": [
    {"tool_calls": [{"tool": "command.run", "args": {"argv": ["sh", "-c", "echo ran > g.txt"]}}]},
    {"final": DONE},
]}


def test_an_approved_node_resumes_through_its_node_task_and_the_run_goes_on(
        redis_broker: Broker, tmp_path: Path) -> None:
    with repo_world(tmp_path / "world") as world:
        workspaces = tmp_path / "workspaces"
        settings = world.settings().model_copy(update={
            "broker_url": SecretStr(redis_broker.url), "worker_queue": redis_broker.queue,
            "workspace_dir": workspaces})
        env = world.env(workspaces, STUDIO_BROKER_URL=redis_broker.url,
                        STUDIO_WORKER_QUEUE=redis_broker.queue)
        db = open_database(settings)
        graph = {"nodes": [
            {"id": "start", "type": "start", "config": {}},
            {"id": "fix", "type": "agent", "config": {
                "provider": "replay", "prompt": "gated", "replay_script": SCRIPT,
                "repo_url": world.url, "pull_request": False,
                "approval_policy": {"command.run": "require"}}},
            {"id": "after", "type": "agent", "config": {
                "provider": "replay", "prompt": "after {{ nodes.fix.result.summary }}",
                "replay_script": {"turns": [{"final": {"status": "success",
                                                       "summary": "after"}}]}}},
            {"id": "end", "type": "end", "config": {}}],
            "edges": [{"id": "a", "source": "start", "target": "fix"},
                      {"id": "b", "source": "fix", "target": "after"},
                      {"id": "c", "source": "after", "target": "end"}]}
        flowchart_id = FlowchartRepository(db).create(
            name="gated", graph=parse_graph(graph).model_dump(mode="json"))
        worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "1", "--no-reaper")
        try:
            service = FlowchartRunService(db, settings, dispatch=flowchart_dispatch(settings))
            run_id = service.start(flowchart_id)
            waiting = wait_for(
                "the node to wait",
                lambda: (r := service.get(run_id))["nodes"]["fix"]["awaiting_approval"] and r,
                180, worker.log)
            assert waiting["status"] == "running"
            assert waiting["nodes"]["after"]["state"] == "pending"
            execution_id = waiting["nodes"]["fix"]["execution_id"]
            (approval,) = ApprovalRepository(db).of_execution(execution_id)
            decided = decide_approval(db, execution_id, approval["id"], "approve", by="alice",
                                      reason=None, dispatch=None,
                                      dispatch_node=flowchart_dispatch(settings),
                                      redactor=settings_redactor())
            assert decided.resume
            done = wait_for("the run to end",
                            lambda: (r := service.get(run_id))["finished_at"] and r,
                            240, worker.log)
        finally:
            worker.stop()
        try:
            assert done["status"] == "succeeded", (done, worker.log())
            assert [done["nodes"][n]["state"] for n in ("fix", "after")] == [
                "succeeded", "succeeded"]
            assert worker.log().count(TASK_RUN_FLOWCHART_NODE) >= 3  # fix twice, after
            branch = service.executions.get(execution_id).branch  # type: ignore[union-attr]
            assert branch is not None and world.remote_file(branch, "g.txt") == "ran\n"
        finally:
            db.dispose()
