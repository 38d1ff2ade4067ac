"""End to end on the Kubernetes node executor with execution logins, on the real PostgreSQL:
HTTP API -> Celery on Redis -> a real ``studio worker`` with ``STUDIO_EXECUTOR=kubernetes`` and
``STUDIO_KUBE_EXECUTION_LOGINS=true`` -> a Job in the API double and its login Secret -> the
container, run by the double's kubelet as ``studio execute``, connecting as its own login ->
push and pull request.

The executor Secret holds the deployment's database URL and ``STUDIO_SECRET_KEY`` as witnesses:
the pod's environment (read from ``/proc`` while it runs) has neither, its database URL is its
own login's, and the GitHub token it pushes with came from its worker, in the login Secret. The
login is gone once the execution has finished.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import make_url, text

from services.db.execution_logins import login_role
from services.db.session import create_db_engine
from services.executors.pod_manifest import job_name
from tests.conftest import IN_CI
from tests.e2e.test_kubernetes_executor import (
    IMAGE,
    NAMESPACE,
    REPO,
    SECRET_KEY,
    TOKEN,
    _admin_token,
    _api_process,
    _base_env,
    _kubeconfig,
    _slow_argv,
    _worker_env,
    _World,
    grant_of,
)
from tests.integration.celery_fixtures import STUDIO, Broker, WorkerProcess, start_worker, wait_for
from tests.integration.databases import (
    admin_conninfo,
    create_migrated_pg_database,
    drop_pg_database,
)
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.github_api import github_api
from tests.support.kube_api import KubeApiServer
from tests.support.kubelet import Kubelet
from tests.unit.helm.chart import render, role_grants

pytestmark = pytest.mark.slow


@pytest.fixture
def pg_url() -> Iterator[str]:
    admin = admin_conninfo()
    if admin is None:
        if IN_CI:
            pytest.fail("PostgreSQL is not reachable")
        pytest.skip("PostgreSQL is not reachable")
    url = create_migrated_pg_database(admin)
    yield url
    drop_pg_database(admin, url)


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if item)


def _role_exists(url: str, role: str) -> bool:
    engine = create_db_engine(url)
    try:
        with engine.connect() as connection:
            return bool(connection.execute(text("SELECT count(*) FROM pg_roles WHERE rolname = :r"),
                                           {"r": role}).scalar())
    finally:
        engine.dispose()


def test_an_execution_runs_in_a_pod_on_its_own_login(
        tmp_path: Path, pg_url: str, redis_broker: Broker,
        workers: list[WorkerProcess]) -> None:
    (tmp_path / "control").mkdir()
    with git_http_server(tmp_path / "git-host", TOKEN) as host, \
            github_api(host.root, TOKEN) as github, KubeApiServer() as kube:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        base = _base_env(tmp_path, pg_url, redis_broker, github.api_url, host.base_url)
        kube.put_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": "studio-executor-secrets", "namespace": NAMESPACE}, "stringData": {
            "STUDIO_DATABASE_URL": pg_url, "STUDIO_SECRET_KEY": SECRET_KEY,
            "STUDIO_GITHUB_TOKEN": "ghs_executor_secret_not_used"}})
        kubelet = Kubelet(kube, tmp_path / "node", {"studio": STUDIO}, frozenset({IMAGE}),
                          {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        kubelet.start()
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", kube.url)
        try:
            with _api_process(base, tmp_path / "api.log") as api_url:
                env = {**_worker_env(base, kubeconfig), "STUDIO_KUBE_EXECUTION_LOGINS": "true"}
                workers.append(start_worker(env, tmp_path / "worker.log", "--concurrency", "1"))
                world = _World(api_url, _admin_token(base), host, github, kube, kubelet,
                               workers, tmp_path)
                _run_on_a_login(world, pg_url)
            # the chart's Role (logins on, its default) covers every call the worker made,
            # the login Secret's creation among them
            used = {grant_of(r) for r in kube.requests()}
            assert ("", "secrets", "create") in used
            assert used <= role_grants(render()), sorted(used)
        finally:
            kubelet.stop()


def _run_on_a_login(world: _World, pg_url: str) -> None:
    slow = ["sleep", "3", _slow_argv()[2]]  # a short command: the pod is read while it runs
    execution_id = world.create(slow)
    name = job_name(execution_id)
    wait_for("the command to run in the pod", lambda: world.slow_running(slow), 240,
             world.diagnostics)
    pid = world.kubelet.pid(name)
    assert pid is not None
    env = _environ(pid)
    assert "STUDIO_SECRET_KEY" not in env
    assert SECRET_KEY not in "".join(env.values())
    assert make_url(env["STUDIO_DATABASE_URL"]).username == login_role(execution_id)
    assert env["STUDIO_GITHUB_TOKEN"] == TOKEN  # handed by the worker, not the executor Secret
    secret: dict[str, Any] | None = world.kube.secret(NAMESPACE, f"{name}-login")
    assert secret is not None and secret["metadata"]["ownerReferences"][0]["name"] == name
    password = make_url(base64.b64decode(secret["data"]["STUDIO_DATABASE_URL"]).decode()).password
    assert password and password in env["STUDIO_DATABASE_URL"]  # the witness is the real one
    final = wait_for("the execution to finish", lambda: world._final(execution_id), 300,
                     world.diagnostics)
    assert final["status"] == "succeeded", (final, world.diagnostics())
    pushes = world.host.pushes_of(final["branch"])
    assert len(pushes) == 1 and world.github.posts == 1
    # the login's password reached no log: the worker's, the API's, the pod's
    logs = [path.read_text(errors="replace") for path in world.tmp_path.glob("*.log")]
    logs += [path.read_text(errors="replace") for path in world.tmp_path.glob("node/logs/*")]
    assert len(logs) >= 3 and not [log for log in logs if str(password) in log]
    deadline = time.monotonic() + 60  # the worker drops the login once it sees the Job end
    while _role_exists(pg_url, login_role(execution_id)):
        assert time.monotonic() < deadline, world.diagnostics()
        time.sleep(0.5)
