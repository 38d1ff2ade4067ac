"""Flowchart runs end to end, in process, on SQLite and PostgreSQL, with the replay provider.

start -> agent -> decision -> (agent | agent) -> end goes down the branch its decision picks;
fan-in waits only for inputs that can still arrive; the guard on node executions fails a run;
cancel stops every running node.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from services.db.executions import ExecutionRepository
from services.db.flowcharts import FlowchartRepository
from services.db.session import Database
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, branching, create, edges, final, node
from tests.support.redaction import settings_redactor

WAIT_S = 120.0  # an upper bound for waits on other threads, never a performance assertion


@pytest.mark.parametrize(("fix_status", "taken", "not_taken"),
                         [("success", "ship", "retry"), ("partial", "retry", "ship")])
def test_the_run_goes_down_the_branch_its_decision_picks(
        db: Database, settings: StudioSettings, ws: Path, fix_status: str, taken: str,
        not_taken: str) -> None:
    flowchart_id = create(db, branching(fix_status))
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(flowchart_id, workspace=str(ws)))
    assert run["status"] == "succeeded", run
    states = {key: value["state"] for key, value in run["nodes"].items()}
    assert states == {"start": "succeeded", "fix": "succeeded", "route": "succeeded",
                      taken: "succeeded", not_taken: "skipped", "end": "succeeded"}
    assert run["nodes"]["route"]["result"]["branch"] == fix_status
    assert run["nodes"][not_taken]["execution_id"] is None
    executions = ExecutionRepository(db, settings_redactor())
    row = executions.get(run["nodes"][taken]["execution_id"])
    assert row is not None and row.status == "succeeded"
    assert row.prompt.endswith(": tests fixed")  # rendered from the upstream result
    assert row.flowchart_run_id == run["id"]
    assert row.node_id == FlowchartRepository(db).node_row_ids(flowchart_id)[taken]
    assert run["nodes"][taken]["result"]["summary"] in ("shipped", "retried")
    linked = [e for e in executions.list(limit=10) if e.flowchart_run_id == run["id"]]
    assert len(linked) == 2  # fix and the taken branch: one node execution each


def test_fan_in_waits_only_for_inputs_that_can_still_arrive(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    graph = {
        "nodes": [
            node("start", "start"),
            node("check", "agent", **agent("Check.", final("success", "ok"))),
            node("route", "decision", field="status"),
            node("good", "agent", **agent("Good.", final("success", "good path"))),
            node("bad", "agent", **agent("Bad.", final("success", "bad path"))),
            node("greet", "command", argv=["printf", "hello"]),
            node("join", "agent", **agent(
                "{{ nodes.good.result.summary }} + {{ nodes.greet.result.stdout }}",
                final("success", "joined"))),
            node("end", "end"),
        ],
        "edges": edges(("start", "check"), ("start", "greet"), ("check", "route"),
                       ("route", "good", "success"), ("route", "bad", "failed"),
                       ("good", "join"), ("bad", "join"), ("greet", "join"), ("join", "end")),
    }
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "succeeded", run
    assert run["nodes"]["bad"]["state"] == "skipped"
    assert run["nodes"]["greet"]["result"]["stdout"] == "hello"
    join = ExecutionRepository(db).get(run["nodes"]["join"]["execution_id"])
    assert join is not None and join.prompt == "good path + hello"
    greet = ExecutionRepository(db).get(run["nodes"]["greet"]["execution_id"])
    assert greet is not None and greet.runtime == "command" and greet.status == "succeeded"
    assert [c.tool_name for c in ExecutionRepository(db).tool_calls(greet.id)] == ["command_run"]


def chain(count: int) -> dict[str, Any]:
    ids = [f"step{i}" for i in range(count)]
    nodes = [node("start", "start"), *[node(i, "agent", **agent(f"Do {i}.", final("success", i)))
                                        for i in ids], node("end", "end")]
    path = ["start", *ids, "end"]
    return {"nodes": nodes, "edges": edges(*zip(path, path[1:], strict=False))}


def test_the_guard_on_node_executions_fails_the_run(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, chain(3)), workspace=str(ws),
                                    max_node_executions=2))
    assert run["status"] == "failed"
    assert run["error_code"] == "node_execution_limit"
    assert "limit of 2 node executions" in run["error_message"]
    assert "'step2'" in run["error_message"]
    states = {key: value["state"] for key, value in run["nodes"].items()}
    assert states == {"start": "succeeded", "step0": "succeeded", "step1": "succeeded",
                      "step2": "cancelled", "end": "cancelled"}
    assert run["nodes"]["step2"]["execution_id"] is None
    assert service.get(service.start(create(db, chain(3)), workspace=str(ws),
                                     max_node_executions=3))["status"] == "succeeded"


def test_a_template_with_a_missing_key_fails_the_node_naming_it(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    graph = chain(1)
    graph["nodes"][1]["config"]["prompt"] = "{{ nodes.start.result.missing }}"
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "failed" and run["error_code"] == "template_error"
    assert "node 'step0'" in run["error_message"] and "missing" in run["error_message"]
    assert run["nodes"]["step0"]["state"] == "failed"


def test_a_decision_without_a_matching_branch_fails_the_run(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, branching("blocked")), workspace=str(ws)))
    # a blocked agent fails its node unless continue_on_failure is set
    assert run["status"] == "failed" and run["nodes"]["fix"]["state"] == "failed"
    graph = branching("blocked")
    graph["nodes"][1]["config"]["continue_on_failure"] = True
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "failed" and run["error_code"] == "decision_failed"
    assert "decision 'route'" in run["error_message"] and "'blocked'" in run["error_message"]


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


def test_cancel_stops_every_running_node(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    wait = {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {
            "argv": ["sh", "-c", "while [ ! -e go ]; do sleep 0.05; done"]}}]},
        {"final": {"status": "success", "summary": "went"}}]}
    graph = {"nodes": [node("start", "start"), node("a", "agent", **agent("A", wait)),
                       node("b", "agent", **agent("B", wait)), node("end", "end")],
             "edges": edges(("start", "a"), ("start", "b"), ("a", "end"), ("b", "end"))}
    pool = ThreadPoolExecutor(max_workers=2)
    service = FlowchartRunService(db, settings,
                                  dispatch=lambda r, n: pool.submit(service.run_node, r, n))
    executions = ExecutionRepository(db, settings_redactor())
    try:
        run_id = service.start(create(db, graph), workspace=str(ws))

        def both_running() -> bool:
            nodes = service.get(run_id)["nodes"]
            ids = [nodes[key]["execution_id"] for key in ("a", "b")]
            rows = [executions.get(i) for i in ids if i]
            return len(rows) == 2 and all(r is not None and r.status == "running" for r in rows)
        _wait_for(both_running, "both nodes running")
        assert service.cancel(run_id)["status"] == "cancelled"
    finally:
        (ws / "go").touch()
        pool.shutdown(wait=True)
    run = service.get(run_id)
    assert run["status"] == "cancelled"
    assert {key: value["state"] for key, value in run["nodes"].items()} == {
        "start": "succeeded", "a": "cancelled", "b": "cancelled", "end": "cancelled"}
    for key in ("a", "b"):
        row = executions.get(run["nodes"][key]["execution_id"])
        assert row is not None and row.status == "cancelled" and row.cancel_requested
