"""``studio reaper --metrics-port``: the reaper's lease expirations and re-dispatches on its own
``/metrics``, parsed with ``prometheus_client``'s parser."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import httpx2
from prometheus_client.parser import text_string_to_metric_families

from services.db.leases import LeaseStore
from services.db.redaction import Redactor
from services.db.session import open_database
from services.runs.request import ExecutionRequest, create_execution
from tests.integration.celery_fixtures import STUDIO, Broker, wait_for
from tests.support import warm_cli
from tests.support.settings import studio_settings


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    try:
        text = httpx2.get(url, timeout=10).text
    except httpx2.TransportError:
        return None
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(text) for s in family.samples}
    done = samples.get(("studio_lease_expirations_total", ()), 0) >= 1
    return samples if done else None


def test_the_reaper_serves_its_lease_expirations_and_redispatches(
        tmp_path: Path, redis_broker: Broker) -> None:
    db_url = f"sqlite:///{tmp_path / 'studio.db'}"
    settings = studio_settings(tmp_path / "data", database_url=db_url,
                               broker_url=redis_broker.url, worker_queue=redis_broker.queue)
    db = open_database(settings)
    try:
        workspace = tmp_path / "ws"
        workspace.mkdir()
        execution_id = create_execution(db, ExecutionRequest(
            provider="replay", prompt="p", workspace=workspace,
            script={"turns": [{"final": "done"}]}), Redactor(), settings=settings)
        # a process that claimed it and died: its lease runs out
        assert LeaseStore(db).claim(execution_id, "dead-owner", 0.05) == 1
        time.sleep(0.2)
    finally:
        db.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "OTEL_",
                                                                    "PROMETHEUS_"))}
    env.update(STUDIO_DATABASE_URL=db_url, STUDIO_BROKER_URL=redis_broker.url,
               STUDIO_WORKER_QUEUE=redis_broker.queue, STUDIO_DATA_DIR=str(tmp_path / "data"),
               STUDIO_WORKSPACE_DIR=str(tmp_path / "workspaces"))
    port = _free_port()
    log = (tmp_path / "reaper.log").open("wb")
    process = warm_cli.Popen([*STUDIO, "reaper", "--metrics-port", str(port)], env=env,
                             stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    try:
        samples = wait_for("the reaper's metrics to count the expired lease",
                           lambda: _scrape(f"http://127.0.0.1:{port}/metrics"), 60,
                           lambda: (tmp_path / "reaper.log").read_text())
    finally:
        process.terminate()
        process.wait(15)
        log.close()
    assert samples[("studio_lease_expirations_total", ())] == 1
    assert samples[("studio_reaper_dispatches_total", (("reason", "expired"),))] == 1
    assert redis_broker.client.llen(redis_broker.queue) == 1  # the message it sent again
