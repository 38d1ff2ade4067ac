"""Which process model ``studio worker`` runs: by default (no ``STUDIO_WORKER_FORK_SERVER``) a
fork server, which forks the executions once it is warm; with ``STUDIO_WORKER_FORK_SERVER=false``
(set the way an operator would, in the worker's environment) a prefork pool whose executions are
exec'ed ``studio execute`` children, with no fork server.

A real worker on the Redis broker runs one replay execution whose only step is a slow command;
while it runs the test reads the process tree in ``/proc``. An exec'ed child's environment block
(``/proc/<pid>/environ``) holds the ``STUDIO_*`` variables it was exec'ed with; a forked child's
is the fork server's, which holds none. With the default, the fork server runs under the worker
and is the execution's parent (witness: with the opt-in default of before, this case fails: no
fork server runs). The opt-out is the other case and the control: no fork server runs under the
worker and the execution's parent is a pool process with the worker's main process above it.
"""

from __future__ import annotations

import os
import random
import re
import signal
from pathlib import Path

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import open_database
from services.runs.request import ExecutionRequest, create_execution
from services.worker.dispatch import dispatch_execution
from tests.integration.celery_fixtures import (
    Broker,
    ancestors,
    processes_running,
    start_worker,
    wait_for,
)
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.settings import studio_settings

pytestmark = pytest.mark.slow

SERVER = "services.cli.fork_server"
WARM = re.compile(r"fork server: pid \d+ ready after")
PATIENCE_S = 180.0
TOKEN = "ghs_ProcessModelToken0123456789abcdefAB"
REPO = "acme/model"


@pytest.mark.parametrize("fork_server", [True, False], ids=["default", "opt-out"])
def test_the_process_model_of_a_worker(tmp_path: Path, redis_broker: Broker,
                                       fork_server: bool) -> None:
    slow = ["sleep", "120", f"0.{random.randrange(10**8):08d}"]  # unique to this run
    db_url = f"sqlite:///{tmp_path / 'studio.db'}"
    settings = studio_settings(tmp_path / "data", database_url=db_url,
                               broker_url=redis_broker.url, worker_queue=redis_broker.queue,
                               github_token=TOKEN, repo_allowed_hosts=["127.0.0.1"])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "OTEL_",
                                                                    "PROMETHEUS_"))}
    env.update(STUDIO_DATABASE_URL=db_url, STUDIO_BROKER_URL=redis_broker.url,
               STUDIO_WORKER_QUEUE=redis_broker.queue, STUDIO_DATA_DIR=str(tmp_path / "data"),
               STUDIO_WORKSPACE_DIR=str(tmp_path / "workspaces"), HOME=str(tmp_path),
               STUDIO_GITHUB_TOKEN=TOKEN, STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1")
    if not fork_server:
        env["STUDIO_WORKER_FORK_SERVER"] = "false"
    with git_http_server(tmp_path / "git", TOKEN) as host:
        seed_bare_repo(host.root, REPO, {"README.md": "process model\n"})
        env["STUDIO_GITHUB_GIT_ORIGINS"] = host.base_url
        db = open_database(settings)
        worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "1", "--no-reaper")
        try:
            if fork_server:  # its first executions are exec'ed until it is warm: wait for it
                wait_for("the fork server to be warm", lambda: WARM.search(worker.log()),
                         PATIENCE_S, worker.log)
            execution_id = create_execution(db, ExecutionRequest(
                provider="replay", prompt="p", repo_url=host.url(REPO), pull_request=False,
                script={"turns": [{"tool_calls": [{"tool": "command.run", "args": {
                    "argv": slow, "timeout_s": 300}}]}, {"final": "done"}]}),
                Redactor(), settings=settings)
            assert dispatch_execution(execution_id, settings) is None  # sent to the worker

            def running() -> list[int]:
                row = ExecutionRepository(db).get(execution_id)
                assert row is not None and row.finished_at is None, (row, worker.log())
                return processes_running(*slow)

            wait_for("the slow command to run", running, PATIENCE_S, worker.log)
            children = processes_running("execute", execution_id)
            assert len(children) == 1, children
            child = children[0]
            parent, *above = ancestors(child)
            servers = [pid for pid in processes_running(SERVER) if worker.pid in ancestors(pid)]
            environ = Path(f"/proc/{child}/environ").read_bytes()
        finally:
            # the slow command first: a worker's warm shutdown waits for its running task
            for pid in processes_running(*slow):
                os.kill(pid, signal.SIGKILL)
            worker.stop()
            db.dispose()

    if fork_server:  # the default: the fork server runs and forks the execution
        assert servers == [parent], (servers, parent)
        assert b"STUDIO_DATABASE_URL=" not in environ  # forked: the server's environment
    else:  # the opt-out: no fork server; the child is exec'ed by a prefork pool process
        assert servers == []
        assert above[0] == worker.pid and parent != worker.pid
        assert b"STUDIO_DATABASE_URL=" in environ  # exec'ed with the executor environment
