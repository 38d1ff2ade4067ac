"""End to end on the Kubernetes node executor: HTTP API -> Celery on Redis -> a real
``studio worker`` with ``STUDIO_EXECUTOR=kubernetes`` -> a Job in the API double -> its container
run by the double's kubelet as ``studio execute`` -> push and pull request.

The container is SIGKILLed mid-run: its Job fails, the lease (held by the pod) expires, the
worker's reaper re-dispatches, the worker deletes the failed Job and creates it again, and the new
pod resumes from the checkpoint: exactly one push and one pull request. A second execution is
cancelled through the API: the supervising worker deletes its Job (foreground), which kills the
container. Every call the worker made to the API server is recorded; the Helm chart's Role must
grant exactly those (plus the pod list an unpullable image is reported through, exercised here
too).

Shared by all "machines": the database (an SQLite file), the broker (a Redis database of this
test's own), the token-guarded git host and the GitHub double. The pod sees only what its spec
declares (the kubelet builds its environment from the spec and the Secret created in the
double), so the worker's own environment (its GitHub token above all) does not reach it.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pydantic import SecretStr

from services.execution.errors import SubstrateError
from services.executors.pod_manifest import job_name
from services.executors.selection import kubernetes_substrate
from services.settings import StudioSettings
from tests.integration.celery_fixtures import (
    STUDIO,
    Broker,
    WorkerProcess,
    alive,
    processes_running,
    start_worker,
    wait_for,
)
from tests.support.git_http_server import git_http_server, seed_bare_repo
from tests.support.github_api import github_api
from tests.support.kube_api import KubeApiServer, Recorded
from tests.support.kubelet import Kubelet
from tests.unit.helm.chart import render, role_grants

pytestmark = pytest.mark.slow

TOKEN = "ghs_KubeExecutorToken0123456789abcdef"
SECRET_KEY = "kube-e2e-secret-key-0123456789"
REPO = "acme/widgets"
NAMESPACE = "studio-e2e"
IMAGE = "registry.example.com/studio/executor:e2e"
EXECUTOR_SECRET = "studio-executor-secrets"
SLOW_S = 120  # never waited for: the kill (or the cancel) lands while it runs
RUNTIME_SETTINGS = {"lease_ttl_s": "6", "heartbeat_s": "1", "reaper_interval_s": "1"}
_LISTENING = re.compile(r"Uvicorn running on http://127\.0\.0\.1:(\d+)")


def _script(slow_argv: list[str]) -> dict[str, Any]:
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "GREETING.md", "content": "hello from the pod\n"}}]},
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": slow_argv, "timeout_s": SLOW_S + 60}}]},
        {"final": {"status": "success", "summary": "Add a greeting", "changes": ["GREETING.md"],
                   "issues": [], "questions": []}},
    ]}


def _slow_argv() -> list[str]:
    # sleep sums its arguments: the second one makes the command line unique to this run
    return ["sleep", str(SLOW_S), f"0.{random.randrange(10**8):08d}"]


def _base_env(tmp_path: Path, db_url: str, broker: Broker, api_url: str,
              git_origin: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("STUDIO_", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_"))}
    env.update(STUDIO_DATABASE_URL=db_url, STUDIO_BROKER_URL=broker.url,
               STUDIO_WORKER_QUEUE=broker.queue, STUDIO_GITHUB_TOKEN=TOKEN,
               STUDIO_SECRET_KEY=SECRET_KEY, STUDIO_GITHUB_API_URL=api_url,
               STUDIO_GITHUB_GIT_ORIGINS=git_origin, STUDIO_REPO_ALLOWED_HOSTS="127.0.0.1",
               STUDIO_DATA_DIR=str(tmp_path / "control" / "data"),
               STUDIO_GIT_AUTHOR_NAME="Pod Agent", STUDIO_GIT_AUTHOR_EMAIL="agent@studio.invalid",
               HOME=str(tmp_path / "control"))
    return env


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: double\n  cluster:\n    server: {server}\n"
        "users:\n- name: worker\n  user:\n    token: worker-service-account-token\n"
        "contexts:\n- name: double\n  context:\n    cluster: double\n    user: worker\n"
        f"    namespace: {NAMESPACE}\n"
        "current-context: double\n")
    return path


def _worker_env(base: dict[str, str], kubeconfig: Path) -> dict[str, str]:
    """What the chart's ConfigMap and Secret give a worker pod (the executor settings)."""
    return {**base, "STUDIO_EXECUTOR": "kubernetes", "STUDIO_KUBE_IMAGE": IMAGE,
            "STUDIO_KUBE_NAMESPACE": NAMESPACE, "STUDIO_KUBE_SECRET_NAME": EXECUTOR_SECRET,
            "STUDIO_KUBE_SERVICE_ACCOUNT": "studio-executor", "STUDIO_KUBE_SANDBOX": "auto",
            "STUDIO_KUBECONFIG": str(kubeconfig)}


@contextmanager
def _api_process(env: dict[str, str], log_path: Path) -> Iterator[str]:
    process = subprocess.Popen([*STUDIO, "api", "--host", "127.0.0.1", "--port", "0",
                                "--log-level", "info"], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    port: list[int] = []
    found = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        with log_path.open("w") as log:
            for line in process.stderr:
                log.write(line)
                log.flush()
                match = _LISTENING.search(line)
                if match and not found.is_set():
                    port.append(int(match.group(1)))
                    found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        found.wait(60)
        assert port, "studio api did not start:\n" + log_path.read_text()
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def _admin_token(env: dict[str, str]) -> str:
    done = subprocess.run([*STUDIO, "tokens", "create", "--name", "e2e", "--scopes",
                           "read,run,admin"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1].strip()


def grant_of(request: Recorded) -> tuple[str, str, str]:
    """The RBAC ``(apiGroup, resource, verb)`` an API request needs."""
    parts = request.path.strip("/").split("/")
    group = parts[1] if parts[0] == "apis" else ""
    rest = parts[parts.index("namespaces") + 2:]
    resource, named = rest[0], len(rest) > 1
    if request.method == "POST":
        verb = "create"
    elif request.method == "DELETE":
        verb = "delete"
    elif request.query.get("watch") == "true":
        verb = "watch"
    else:
        verb = "get" if named else "list"
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    return group, resource, verb


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def test_an_execution_runs_as_a_job_survives_a_killed_pod_and_cancel_deletes_the_job(
        tmp_path: Path, redis_broker: Broker, workers: list[WorkerProcess]) -> None:
    db_url = f"sqlite:///{tmp_path / 'studio.db'}"
    (tmp_path / "control").mkdir()
    with git_http_server(tmp_path / "git-host", TOKEN) as host, \
            github_api(host.root, TOKEN) as github, KubeApiServer() as kube:
        seed_bare_repo(host.root, REPO, {"README.md": "# widgets\n"})
        base = _base_env(tmp_path, db_url, redis_broker, github.api_url, host.base_url)
        for key, value in RUNTIME_SETTINGS.items():
            done = subprocess.run([*STUDIO, "settings", "set", key, value], env=base,
                                  capture_output=True, text=True, timeout=120, check=False)
            assert done.returncode == 0, done.stderr
        kube.put_secret(NAMESPACE, {"apiVersion": "v1", "kind": "Secret", "metadata": {
            "name": EXECUTOR_SECRET, "namespace": NAMESPACE}, "stringData": {
            "STUDIO_DATABASE_URL": db_url, "STUDIO_SECRET_KEY": SECRET_KEY,
            "STUDIO_GITHUB_TOKEN": TOKEN}})
        kubelet = Kubelet(kube, tmp_path / "node", {"studio": STUDIO}, frozenset({IMAGE}),
                          {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"})
        kubelet.start()
        kubeconfig = _kubeconfig(tmp_path / "kubeconfig", kube.url)
        try:
            with _api_process(base, tmp_path / "api.log") as api_url:
                workers.append(start_worker(_worker_env(base, kubeconfig),
                                            tmp_path / "worker.log", "--concurrency", "2"))
                world = _World(api_url, _admin_token(base), host, github, kube, kubelet,
                               workers, tmp_path)
                world.kill_a_pod_and_resume()
                world.cancel_through_the_api()
            world.check_the_role(kubeconfig)
        finally:
            kubelet.stop()


class _World:
    def __init__(self, api_url: str, token: str, host: Any, github: Any, kube: KubeApiServer,
                 kubelet: Kubelet, workers: list[WorkerProcess], tmp_path: Path) -> None:
        self.api_url, self.token, self.host, self.github = api_url, token, host, github
        self.kube, self.kubelet, self.workers, self.tmp_path = kube, kubelet, workers, tmp_path

    def client(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.api_url, timeout=30,
                             headers={"Authorization": f"Bearer {self.token}"})

    def diagnostics(self) -> str:
        logs = [f"--- {w.log_path.name}\n{w.log()}" for w in self.workers]
        logs += [f"--- pod log {name}\n{self.kubelet.log(name)}" for name in self.kubelet.pods]
        return "\n".join(logs)

    def create(self, slow_argv: list[str]) -> str:
        body = {"repo_url": self.host.url(REPO), "provider": "replay", "prompt": "Add a greeting",
                "replay_script": _script(slow_argv), "pull_request": True}
        with self.client() as client:
            response = client.post("/api/executions", json=body)
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    def execution(self, execution_id: str) -> dict[str, Any]:
        with self.client() as client:
            row: dict[str, Any] = client.get(f"/api/executions/{execution_id}").json()
        return row

    def slow_running(self, slow_argv: list[str]) -> bool:
        return bool(processes_running(*slow_argv))

    def kill_a_pod_and_resume(self) -> None:
        slow = _slow_argv()
        execution_id = self.create(slow)
        name = job_name(execution_id)
        wait_for("the slow command to run in the first pod", lambda: self.slow_running(slow),
                 240, self.diagnostics)
        first_pid = self.kubelet.pid(name)
        assert first_pid is not None
        self._check_pod_environment(first_pid)
        job = self.kube.job(NAMESPACE, name)
        assert job is not None
        pod = job["spec"]["template"]["spec"]
        assert pod["serviceAccountName"] == "studio-executor"
        assert pod["automountServiceAccountToken"] is False
        assert self.host.pushes_of(self.execution(execution_id)["branch"] or "") == []

        self.kubelet.kill(name)  # SIGKILL of the container, mid-run
        wait_for("the killed pod's processes to be gone",
                 lambda: not alive(first_pid) and not self.slow_running(slow), 60,
                 self.diagnostics)
        final = wait_for("the execution to finish in a second pod",
                         lambda: self._final(execution_id), 300, self.diagnostics)
        assert final["status"] == "succeeded", (final, self.diagnostics())
        assert len([p for p in self.kubelet.started if p.startswith(name)]) == 2
        branch = final["branch"]
        pushes = self.host.pushes_of(branch)
        assert len(pushes) == 1, pushes
        assert pushes[0].new == final["head_sha"]
        assert self.github.posts == 1 and len(self.github.pulls) == 1
        assert self.github.pulls[0].head == branch
        deletes = [r for r in self.kube.requests("DELETE") if r.path.endswith(f"/jobs/{name}")]
        assert [r.query.get("propagationPolicy") for r in deletes] == ["Foreground"]  # relaunch

    def _check_pod_environment(self, pid: int) -> None:
        """The container got exactly its spec's environment (plus the image's PATH and LANG)."""
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        names = {item.split(b"=", 1)[0].decode() for item in raw if item}
        assert names == {
            "PATH", "LANG", "STUDIO_WORKSPACE_DIR", "STUDIO_SANDBOX", "HOME", "TMPDIR",
            "STUDIO_ENV", "STUDIO_LOG_LEVEL", "STUDIO_GITHUB_API_URL", "STUDIO_REPO_MIRRORS",
            "STUDIO_GITHUB_GIT_ORIGINS", "STUDIO_REPO_ALLOWED_HOSTS", "STUDIO_GIT_AUTHOR_NAME",
            "STUDIO_GIT_AUTHOR_EMAIL", "STUDIO_DATABASE_URL", "STUDIO_SECRET_KEY",
            "STUDIO_GITHUB_TOKEN",
            # the providers' auth modes (issue 16, cloud auth) and the setup phase's network
            "STUDIO_CLAUDE_AUTH", "STUDIO_GEMINI_AUTH", "STUDIO_CODEX_AUTH",
            "STUDIO_SETUP_ALLOWLIST", "STUDIO_SETUP_TIMEOUT_S",
            # approvals pending inside the pod (services.runs.approvals)
            "STUDIO_APPROVAL_TIMEOUT_S"}, names
        assert "STUDIO_BROKER_URL" not in names and "STUDIO_KUBECONFIG" not in names

    def _final(self, execution_id: str) -> dict[str, Any] | None:
        row = self.execution(execution_id)
        return row if row["status"] in ("succeeded", "failed", "cancelled", "stalled") else None

    def cancel_through_the_api(self) -> None:
        slow = _slow_argv()
        execution_id = self.create(slow)
        name = job_name(execution_id)
        wait_for("the slow command to run", lambda: self.slow_running(slow), 240,
                 self.diagnostics)
        pid = self.kubelet.pid(name)
        assert pid is not None
        with self.client() as client:
            response = client.post(f"/api/executions/{execution_id}/cancel")
        assert response.status_code == 202, response.text
        wait_for("the worker to delete the Job", lambda: any(
            r.path.endswith(f"/jobs/{name}") for r in self.kube.requests("DELETE")), 60,
            self.diagnostics)
        delete = [r for r in self.kube.requests("DELETE") if r.path.endswith(f"/jobs/{name}")]
        assert delete[0].query.get("propagationPolicy") == "Foreground"
        wait_for("the container to be killed", lambda: not alive(pid) and not
                 self.slow_running(slow), 60, self.diagnostics)
        final = wait_for("the execution to end cancelled", lambda: self._final(execution_id),
                         240, self.diagnostics)
        assert final["status"] == "cancelled", (final, self.diagnostics())
        assert self.host.pushes_of(final["branch"] or "") == []

    def check_the_role(self, kubeconfig: Path) -> None:
        """The chart's Role grants exactly what the worker called (and the pod list)."""
        used = {grant_of(r) for r in self.kube.requests()}
        # An image that cannot be pulled is reported from the pod list: exercise that too,
        # through the same client configuration the worker uses.
        before = len(self.kube.requests())
        settings = StudioSettings(executor="kubernetes", kube_image="registry.example.com/nope:1",
                                  kube_namespace=NAMESPACE, kubeconfig=kubeconfig,
                                  kube_secret_name=EXECUTOR_SECRET,
                                  database_url=SecretStr("sqlite://"))
        substrate = kubernetes_substrate(settings)
        handle = substrate.launch("image-pull-check-0001")
        with pytest.raises(SubstrateError) as refused:
            substrate.wait(handle, 60)
        assert refused.value.details["reason"] == "image_pull_failure"
        substrate.cancel(handle)
        used |= {grant_of(r) for r in self.kube.requests()[before:]}
        # this test's database is SQLite: no execution logins (PostgreSQL only), so the chart
        # rendered without them (their Secret's creation is tested with the real PostgreSQL in
        # tests/integration/executors/test_execution_logins_pod.py)
        assert used == role_grants(render({"executor": {"executionLogins": False}})), \
            sorted(used)


def test_the_grant_derivation_reads_paths_as_rbac_does() -> None:
    assert grant_of(Recorded("GET", "/apis/batch/v1/namespaces/a/jobs", {"watch": "true"})) == (
        "batch", "jobs", "watch")
    assert grant_of(Recorded("GET", "/apis/batch/v1/namespaces/a/jobs/j/status", {})) == (
        "batch", "jobs/status", "get")
    assert grant_of(Recorded("GET", "/api/v1/namespaces/a/pods", {})) == ("", "pods", "list")
    assert grant_of(Recorded("DELETE", "/apis/batch/v1/namespaces/a/jobs/j", {})) == (
        "batch", "jobs", "delete")
    assert sys.executable  # the kubelet runs `studio` as this interpreter
