"""Flowchart nodes and the kill switch (in process, on SQLite and PostgreSQL): a node that is
dispatched while the switch is engaged is held (its execution queued and marked paused, the node
still running, the run not failed); released, the paused node is dispatched again as a node
task, runs and the run ends. A runner that dies while its node is held does not fail it."""

from __future__ import annotations

from pathlib import Path

from services.db.executions import ExecutionRepository
from services.db.runtime_settings import SettingsRepository
from services.db.session import Database
from services.flowcharts.service import FlowchartRunService
from services.runs.pauses import redispatch_paused
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, create, edges, final, node


def _graph(work: dict[str, object]) -> dict[str, object]:
    return {"nodes": [node("start", "start"), work, node("end", "end")],
            "edges": edges(("start", work["id"]), (work["id"], "end"))}  # type: ignore[arg-type]


def _hold_then_release(db: Database, settings: StudioSettings, ws: Path,
                       work: dict[str, object]) -> None:
    sent: list[tuple[str, str]] = []
    service = FlowchartRunService(db, settings, dispatch=lambda r, n: sent.append((r, n)))
    switch = SettingsRepository(db)
    switch.set("killswitch_engaged", True)
    try:
        _held_and_released(db, service, switch, ws, work, sent)
    finally:
        switch.set("killswitch_engaged", False)  # the PostgreSQL database is shared


def _held_and_released(db: Database, service: FlowchartRunService, switch: SettingsRepository,
                       ws: Path, work: dict[str, object], sent: list[tuple[str, str]]) -> None:
    run_id = service.start(create(db, _graph(work)), workspace=str(ws))
    node_id = str(work["id"])
    assert sent == [(run_id, node_id)]
    service.run_node(run_id, node_id)  # the node task arrives while the switch is engaged
    held = service.get(run_id)
    assert held["status"] == "running" and held["nodes"][node_id]["state"] == "running"
    execution_id = held["nodes"][node_id]["execution_id"]
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and (row.status, row.paused_reason) == ("queued", "killswitch")
    assert ExecutionRepository(db).events(execution_id) == []  # nothing ran
    service.fail_unfinished(run_id, node_id, "its child ended")  # held, not failed
    assert service.get(run_id)["nodes"][node_id]["state"] == "running"
    assert redispatch_paused(db, lambda _id: None, lambda r, n: sent.append((r, n))) == []
    assert sent == [(run_id, node_id)]  # nothing is sent while the switch is engaged

    switch.set("killswitch_engaged", False)
    resumed = redispatch_paused(db, lambda _id: None, lambda r, n: sent.append((r, n)))
    assert execution_id in resumed and (run_id, node_id) in sent[1:]
    service.run_node(run_id, node_id)  # the node task sent on release
    done = service.get(run_id)
    assert done["status"] == "succeeded", done
    assert done["nodes"][node_id]["state"] == "succeeded"
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and row.status == "succeeded" and row.paused_reason is None


def test_a_command_node_dispatched_while_engaged_waits_and_runs_on_release(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    _hold_then_release(db, settings, ws, node("say", "command", command="echo hi > said.txt"))
    assert (ws / "said.txt").read_text() == "hi\n"


def test_an_agent_node_dispatched_while_engaged_waits_and_runs_on_release(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    _hold_then_release(db, settings, ws, node("fix", "agent", **agent(
        "say done", final("success", "done"))))


def test_a_held_node_of_a_run_cancelled_meanwhile_is_not_left_queued(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    sent: list[tuple[str, str]] = []
    service = FlowchartRunService(db, settings, dispatch=lambda r, n: sent.append((r, n)))
    switch = SettingsRepository(db)
    switch.set("killswitch_engaged", True)
    try:
        run_id = service.start(create(db, _graph(node("say", "command", command="true"))),
                               workspace=str(ws))
        service.run_node(run_id, "say")
        execution_id = service.get(run_id)["nodes"]["say"]["execution_id"]
        assert service.cancel(run_id)["status"] == "cancelled"
    finally:
        switch.set("killswitch_engaged", False)
    assert execution_id in redispatch_paused(db, lambda _id: None,
                                             lambda r, n: sent.append((r, n)))
    service.run_node(run_id, "say")  # the node task sent on release: the run has ended
    row = ExecutionRepository(db).get(execution_id)
    assert row is not None and (row.status, row.error_code) == ("cancelled", "cancelled")
    assert execution_id not in redispatch_paused(db, lambda _id: None, lambda r, n: None)
