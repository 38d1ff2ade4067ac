"""A run always ends: a node claimed but never started is cancelled with its run, a node whose
runner broke fails with a code, a node whose runner died is failed by whoever waited on it, and
the run's own directory is made by the run (in process, on SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.db.session import Database
from services.flowcharts.nodes import NodeRunner
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from tests.integration.flowcharts.graphs import agent, create, edges, final, node


def _one_command(text: str = "true") -> dict[str, object]:
    return {"nodes": [node("start", "start"), node("c", "command", command=text),
                      node("end", "end")],
            "edges": edges(("start", "c"), ("c", "end"))}


def test_cancel_ends_a_node_that_was_claimed_but_never_started(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    held: list[str] = []
    service = FlowchartRunService(db, settings, dispatch=lambda _r, n: held.append(n))
    run_id = service.start(create(db, _one_command()), workspace=str(ws))
    assert held == ["c"] and service.get(run_id)["nodes"]["c"]["state"] == "running"
    run = service.cancel(run_id)
    assert run["status"] == "cancelled"
    assert run["nodes"]["c"]["state"] == "cancelled"
    service.run_node(run_id, "c")  # the task arrives late: nothing runs
    assert service.get(run_id)["nodes"]["c"]["execution_id"] is None


def test_a_runner_that_breaks_fails_the_node_with_a_code(
        db: Database, settings: StudioSettings, ws: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(_self: NodeRunner, _job: object) -> dict[str, object]:
        raise RuntimeError("a bug")
    monkeypatch.setattr(NodeRunner, "command_args", broken)
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, _one_command()), workspace=str(ws)))
    assert run["status"] == "failed"
    assert (run["nodes"]["c"]["state"], run["nodes"]["c"]["error_code"]) == \
        ("failed", "internal_error")
    assert run["nodes"]["end"]["state"] == "cancelled"


def test_a_node_whose_runner_died_is_failed_by_its_parent(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    held: list[str] = []
    service = FlowchartRunService(db, settings, dispatch=lambda _r, n: held.append(n))
    run_id = service.start(create(db, _one_command()), workspace=str(ws))
    service.fail_unfinished(run_id, "c", "the child was killed")
    run = service.get(run_id)
    assert run["status"] == "failed" and run["error_code"] == "substrate_error"
    assert "the child was killed" in run["nodes"]["c"]["error_message"]
    service.fail_unfinished(run_id, "c", "again")  # a no-op once the node finished
    assert service.get(run_id)["nodes"]["c"]["error_message"] == run["nodes"]["c"][
        "error_message"]


def test_a_run_without_a_directory_makes_its_own(db: Database, tmp_path: Path) -> None:
    settings = StudioSettings(data_dir=tmp_path / "data", workspace_dir=tmp_path / "wsroot")
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, _one_command("echo hi > made.txt"))))
    assert run["status"] == "succeeded", run
    run_dir = Path(run["workspace"])
    assert run_dir.parent == (tmp_path / "wsroot" / "flowchart-runs").resolve()
    assert (run_dir / "made.txt").read_text() == "hi\n"


def test_node_limits_that_do_not_validate_fail_the_node_as_invalid_arguments(
        db: Database, settings: StudioSettings, ws: Path) -> None:
    graph = {"nodes": [node("start", "start"),
                       node("a", "agent", **agent("x", final("success", "ok"),
                                                  limits={"max_iterations": "many"})),
                       node("end", "end")],
             "edges": edges(("start", "a"), ("a", "end"))}
    service = FlowchartRunService(db, settings)
    run = service.get(service.start(create(db, graph), workspace=str(ws)))
    assert run["status"] == "failed"
    assert run["nodes"]["a"]["error_code"] == "invalid_arguments"
    assert "max_iterations" in run["nodes"]["a"]["error_message"]
