"""Which process runs an execution of ``studio api`` without a broker: by default
(``STUDIO_WORKER_FORK_SERVER`` on) a child forked from the API's own fork server, started at the
API's first execution; with the setting off an exec'ed ``studio execute`` child of the API, and no
fork server at all.

A real ``studio api`` (no broker) runs replay executions whose only step is a slow command; while
one runs the test reads the process tree in ``/proc``. An exec'ed child's environment block
(``/proc/<pid>/environ``) holds the ``STUDIO_*`` variables it was exec'ed with; a forked child's
is the fork server's, which holds none (no database URL, no token). The executions before the
server is warm are exec'ed (nothing waits for it), so the default case runs executions until one
is forked. Witness: before the API had a fork server of its own, the default case fails (no fork
server ever runs under the API). The opt-out is the control: the execution's parent is the API
itself. Both check that an API that has run no execution has no fork server (it is started
lazily), and that none is left once the API has stopped.
"""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import GIT_TOKEN, ApiServer, running_api
from tests.integration.celery_fixtures import alive, ancestors, processes_running, wait_for

pytestmark = pytest.mark.slow

SERVER = "services.cli.fork_server"
PATIENCE_S = 300.0


@dataclass(frozen=True)
class Seen:
    """One execution as the test saw it while its slow command ran."""

    parent: int
    servers: list[int]  # the fork servers running under the API
    environ: bytes  # the execution's process's environment block


def servers_under(pid: int) -> list[int]:
    return [server for server in processes_running(SERVER) if pid in ancestors(server)]


def run_one(api: ApiServer) -> Seen:
    """Create an execution whose command sleeps, look at its process while it sleeps, then let
    it end."""
    slow = ["sleep", "300", f"0.{random.randrange(10**8):08d}"]  # unique to this run
    execution_id = create(api, {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {"argv": slow, "timeout_s": 600}}]},
        {"final": "done"}]})
    try:
        wait_for("the slow command to run", lambda: processes_running(*slow), PATIENCE_S,
                 lambda: "".join(api.log[-40:]))
        children = processes_running("execute", execution_id)
        assert len(children) == 1, children
        seen = Seen(parent=ancestors(children[0])[0], servers=servers_under(api.process.pid),
                    environ=Path(f"/proc/{children[0]}/environ").read_bytes())
    finally:
        for pid in processes_running(*slow):
            os.kill(pid, signal.SIGKILL)
    wait_final(api, execution_id, timeout=PATIENCE_S)
    return seen


@pytest.mark.parametrize("fork_server", [True, False], ids=["default", "opt-out"])
def test_the_process_of_an_execution_of_a_broker_less_api(tmp_path: Path,
                                                           fork_server: bool) -> None:
    extra = {} if fork_server else {"STUDIO_WORKER_FORK_SERVER": "false"}
    with running_api(tmp_path, extra_env=extra) as api:
        api_pid = api.process.pid
        assert servers_under(api_pid) == []  # lazily: none before the first execution
        seen = [run_one(api)]

        def forked() -> bool:
            if seen[-1].parent in seen[-1].servers:
                return True
            seen.append(run_one(api))
            return False

        if fork_server:  # exec'ed until the server is warm: run more until one is forked
            wait_for("an execution forked by the API's fork server", forked, PATIENCE_S,
                     lambda: "".join(api.log[-40:]))
        servers = servers_under(api_pid)
    assert not [pid for pid in servers if alive(pid)]  # stopped with the API

    last = seen[-1]
    if fork_server:  # the default: the API's fork server forks the execution
        assert last.servers == [last.parent], last
        assert b"STUDIO_DATABASE_URL=" not in last.environ  # forked: the server's environment
        assert GIT_TOKEN.encode() not in last.environ
        # every execution before it was exec'ed by the API while the server warmed up
        assert all(one.parent == api_pid for one in seen[:-1]), seen
    else:  # the opt-out: no fork server; the API exec'ed the child, as before
        assert seen[0].servers == [] and servers == []
        assert seen[0].parent == api_pid
        assert b"STUDIO_DATABASE_URL=" in seen[0].environ  # exec'ed with the executor environment
