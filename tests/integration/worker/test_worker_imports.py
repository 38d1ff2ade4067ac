"""``studio worker`` starts its Celery worker without Celery's command line (issue 39).

``app.worker_main`` ran Celery's ``celery worker`` click command, whose module imports
click-repl, prompt_toolkit and pygments: about 11 MB of the worker's memory, one worker per
machine's executions, for a command line nobody types. The worker now builds the same
``app.Worker`` itself (:func:`services.worker.runner.consume`). Likewise redis-py imported
OpenTelemetry's metrics SDK (61 modules, about 2 MB) that nothing uses; the worker imports it
without (:mod:`services.worker.broker_client`).

A real worker on the Redis broker, with a hook on Celery's ``worker_ready`` signal that writes the
process's modules and then stops it (``SIGTERM``: the warm shutdown). Witness: before, those
modules were loaded. Positive control: the worker did come up (Celery's worker is loaded, its
banner names the queue, the thread pool and the node), and the warm shutdown ends it with 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.celery_fixtures import Broker

pytestmark = pytest.mark.slow

HOOK = """
import json, os, signal, sys
from celery.signals import worker_ready

@worker_ready.connect
def _ready(**_):
    with open(sys.argv[1], "w") as out:
        json.dump(sorted(sys.modules), out)
    os.kill(os.getpid(), signal.SIGTERM)

from services.cli.main import main
main(["worker", "--concurrency", "3", "--no-reaper"])
"""
# (pygments comes with them, but also with alembic's migration of this test's SQLite database)
CLI_ONLY = ("click_repl", "prompt_toolkit", "celery.bin")


def test_the_worker_runs_without_celerys_command_line(tmp_path: Path,
                                                      redis_broker: Broker) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "OTEL_",
                                                                    "PROMETHEUS_"))}
    env.update(STUDIO_DATABASE_URL=f"sqlite:///{tmp_path / 'studio.db'}",
               STUDIO_BROKER_URL=redis_broker.url, STUDIO_WORKER_QUEUE=redis_broker.queue,
               STUDIO_DATA_DIR=str(tmp_path / "data"), HOME=str(tmp_path),
               STUDIO_WORKSPACE_DIR=str(tmp_path / "workspaces"))
    modules_file = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", HOOK, str(modules_file)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    modules = set(json.loads(modules_file.read_text()))
    assert "celery.apps.worker" in modules and "celery.concurrency.thread" in modules
    assert f".> {redis_broker.queue}" in output and "(thread)" in output, output
    assert "concurrency: 3" in output and "studio-" in output, output
    assert sorted(name for name in modules if name.startswith(CLI_ONLY)) == []
    # redis-py is loaded (the control: its observability module too), OpenTelemetry's metrics
    # SDK, which that module imported only to note it is installed, is not (it was on main)
    assert {"redis", "redis.observability.providers"} <= modules
    assert sorted(name for name in modules if name.startswith("opentelemetry.sdk.metrics")) == []
