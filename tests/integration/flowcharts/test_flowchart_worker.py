"""Traversal through Celery: every work node is one ``studio.run_flowchart_node`` task, run by a
real ``studio worker`` process on the real Redis broker; and in process without a broker."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr

from services.db.executions import ExecutionRepository
from services.db.session import open_database
from services.flowcharts.service import FlowchartRunService
from services.settings import StudioSettings
from services.worker.celery_app import build_celery
from services.worker.flowchart_tasks import flowchart_dispatch
from services.worker.names import TASK_RUN_FLOWCHART_NODE
from tests.integration.celery_fixtures import Broker, start_worker, wait_for
from tests.integration.flowcharts.graphs import branching, create


def test_the_task_is_registered_and_no_broker_means_in_process(tmp_path: Path) -> None:
    settings = StudioSettings(data_dir=tmp_path)
    assert TASK_RUN_FLOWCHART_NODE in build_celery(settings).tasks
    assert flowchart_dispatch(settings) is None  # FlowchartRunService then runs nodes inline


def test_each_node_runs_as_a_task_of_a_real_worker(redis_broker: Broker, tmp_path: Path,
                                                   ws: Path) -> None:
    db_url = f"sqlite:///{tmp_path / 'studio.db'}"
    settings = StudioSettings(database_url=SecretStr(db_url), data_dir=tmp_path / "data",
                              broker_url=SecretStr(redis_broker.url),
                              worker_queue=redis_broker.queue)
    db = open_database(settings)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STUDIO_")}
    env.update(STUDIO_DATABASE_URL=db_url, STUDIO_DATA_DIR=str(tmp_path / "data"),
               STUDIO_BROKER_URL=redis_broker.url, STUDIO_WORKER_QUEUE=redis_broker.queue)
    worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "1", "--no-reaper")
    try:
        service = FlowchartRunService(db, settings, dispatch=flowchart_dispatch(settings))
        run_id = service.start(create(db, branching("partial")), workspace=str(ws))
        run = wait_for("the run to end", lambda: (r := service.get(run_id))["finished_at"] and r,
                       120, worker.log)
    finally:
        worker.stop()
    assert run["status"] == "succeeded", (run, worker.log())
    assert run["nodes"]["ship"]["state"] == "skipped"
    row = ExecutionRepository(db).get(run["nodes"]["retry"]["execution_id"])
    assert row is not None and row.prompt == "Try again after: tests fixed"
    assert worker.log().count(TASK_RUN_FLOWCHART_NODE) >= 2  # fix and retry, each a task
    db.dispose()
