"""With a broker configured, ``studio eval run`` hands each task's execution to the workers: a
real ``studio worker`` (Celery on Redis) runs them, the eval process only records, waits and
grades."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.celery_fixtures import Broker, start_worker
from tests.integration.evals.eval_env import eval_env, report, studio, write_value_task


def test_the_tasks_run_on_the_worker_when_a_broker_is_configured(
        tmp_path: Path, redis_broker: Broker) -> None:
    suite = tmp_path / "suite"
    for name in ("one", "two"):
        write_value_task(suite, name)
    (suite / "suite.json").write_text(json.dumps({"name": "brokered"}))
    env = eval_env(f"sqlite:///{tmp_path / 'studio.db'}", tmp_path / "home")
    env.update(STUDIO_BROKER_URL=redis_broker.url, STUDIO_WORKER_QUEUE=redis_broker.queue)
    worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "2")
    try:
        data = report(studio(env, "eval", "run", str(suite), "--json"))
    finally:
        worker.stop()
    assert [i["resolved"] for i in data["items"]] == [True, True]
    log = worker.log()
    for item in data["items"]:  # each execution was the worker's, not a child of the eval
        assert f"execution {item['execution_id']}: studio execute ended" in log
