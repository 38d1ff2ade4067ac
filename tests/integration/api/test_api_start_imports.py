"""``studio api`` starts without the engine, the worker or any provider SDK.

The real ``studio api`` (no broker: executions run from the API through the worker's handler,
each in a ``studio execute`` child; flowchart nodes in ``studio flowchart-node`` children) runs in
a subprocess through a small wrapper that writes the names in ``sys.modules`` to a file whenever
it receives ``SIGUSR1``. Once it answers, the API has loaded what it serves (every router, the
flowchart run service, the execution request) but none of what runs an execution: the agent loop,
the durable path, the legacy runtime and its CLI adapters, the worker's dispatch and Celery, the
provider SDKs. Those are imported when they are used: the worker's dispatch (and Celery) on the
first execution dispatched (the positive control below), the engine only in the child that runs it.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.integration.api.helpers import create, wait_final
from tests.integration.api.server import REPO, ApiServer, api_process, studio_env
from tests.support.git_http_server import git_http_server, seed_bare_repo

WRAPPER = """
import json, os, signal, sys
out, sys.argv = sys.argv[1], ["studio", *sys.argv[2:]]

def dump(_signum, _frame):
    with open(out + ".part", "w") as f:
        json.dump(sorted(sys.modules), f)
    os.replace(out + ".part", out)

signal.signal(signal.SIGUSR1, dump)
from services.cli.main import main
main()
"""


# Modules (a package and everything under it) that run an execution, not serve the API.
ENGINE = (
    "services.runs.loop", "services.runs.durable", "services.runs.attempt",
    "services.runs.legacy_runtime", "services.runs.finalize", "services.execution.legacy",
    "services.execution.agent_runtime", "services.execution.tool_domains.registry",
)
# The worker's dispatch, its handler and the substrate that starts the execution's child.
WORKER = ("services.worker.dispatch", "services.worker.handlers", "services.worker.child",
          "services.executors.forked", "celery", "kombu")
SDKS = ("openai", "google.genai", "claude_agent_sdk", "anthropic", "mcp", "github")


def under(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@contextmanager
def api_with_module_dumps(root: Path) -> Iterator[tuple[ApiServer, Path]]:
    """``studio api --port 0`` (no broker, its own SQLite database and git host) through
    :data:`WRAPPER`; yields the server and the file its module dumps go to."""
    with git_http_server(root / "git-host", "ghs_ApiTestToken0123456789abcdefABCDEF") as host:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        env = studio_env(root, host.base_url)
        out = root / "modules.json"
        command = (sys.executable, "-c", WRAPPER, str(out), "api", "--host", "127.0.0.1",
                   "--port", "0")
        with api_process(env, host.url(REPO), command) as server:
            yield server, out


def loaded(api: ApiServer, out: Path) -> set[str]:
    """The modules the API process has loaded now."""
    out.unlink(missing_ok=True)
    os.kill(api.process.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 30
    while not out.exists():
        assert time.monotonic() < deadline, "no module dump:\n" + "".join(api.log[-20:])
        time.sleep(0.05)
    return set(json.loads(out.read_text()))


def test_the_api_starts_without_the_engine_the_worker_or_an_sdk(tmp_path: Path) -> None:
    with api_with_module_dumps(tmp_path) as (api, out):
        with api.client() as client:
            assert client.get("/healthz").json() == {"ok": True}
            assert "/api/flowcharts" in client.get("/openapi.json").json()["paths"]
        at_start = loaded(api, out)
        # what the API serves is loaded: the check sees the process's own modules
        assert {"services.api.routers.executions", "services.api.routers.flowcharts",
                "services.flowcharts.service", "services.runs.request",
                "services.runs.review_start"} <= at_start
        assert under(at_start, ENGINE) == []
        assert under(at_start, WORKER) == []
        assert under(at_start, SDKS) == []

        # positive control: dispatching an execution imports the worker's dispatch (and Celery
        # with it) in the API; the engine still runs only in the execution's child
        execution_id = create(api, {"turns": [{"final": "done"}]})
        assert wait_final(api, execution_id)["status"] == "succeeded"
        after_a_run = loaded(api, out)
        assert {"services.worker.dispatch", "celery"} <= set(under(after_a_run, WORKER))
        assert under(after_a_run, ENGINE) == []
