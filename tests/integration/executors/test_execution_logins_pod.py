"""An executor pod with a per-execution database login (``STUDIO_KUBE_EXECUTION_LOGINS``),
through the API double and its kubelet and the real PostgreSQL: the worker issues the login,
puts its URL in a Secret owned by the Job, and the pod's environment holds that URL and never
the deployment's STUDIO_DATABASE_URL or STUDIO_SECRET_KEY (the executor Secret holds both as
witnesses; the positive control shows the same pod without logins does get them). The login
connects as its own role, and is dropped once the Job is done."""

from __future__ import annotations

import base64
import json
import sys
import uuid
from pathlib import Path

import pytest
from kubernetes import client
from pydantic import SecretStr
from sqlalchemy import create_engine, make_url, text

from services.db.execution_logins import ExecutionLoginError, ExecutionLogins, login_role
from services.db.integrations import IntegrationRepository
from services.db.mcp_servers import McpServerRepository
from services.db.redaction import Redactor
from services.db.session import Database
from services.execution.profile_checks import agent_profile
from services.executors.base import Handle, SubstrateStatus
from services.executors.kubernetes import KubernetesSubstrate
from services.executors.pod_manifest import JobSettings, SecretEnv
from services.executors.selection import kubernetes_substrate
from services.runs.agent_setup import handed_mcp
from services.runs.request import ExecutionRequest, create_execution
from services.worker.handed import handed_secrets
from tests.integration.executors.conftest import IMAGE, NAMESPACE
from tests.integration.executors.test_kubernetes_kubelet import _report
from tests.support.kube_api import KubeApiServer
from tests.support.kubelet import Kubelet
from tests.support.settings import studio_settings

# Stands for `studio execute <id>`: writes the environment it was exec'd with, exits 0.
REPORTER = (
    "import json, os, sys\n"
    "raw = open('/proc/self/environ', 'rb').read().decode().split(chr(0))\n"
    "env = dict(item.split('=', 1) for item in raw if item)\n"
    "open('report.json', 'w').write(json.dumps({'env': env, 'argv': sys.argv[1:]}))\n"
)
MASTER_URL = "postgresql://studio:master-password-witness@db.internal/studio"
MASTER_KEY = "master-secret-key-witness-0123456789"
SECRET_ENV = (SecretEnv("STUDIO_DATABASE_URL"), SecretEnv("STUDIO_SECRET_KEY"))


def _new_id() -> str:
    return str(uuid.uuid4())


def _b64(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


def _run(tmp_path: Path, logins: ExecutionLogins | None,
         execution_id: str) -> tuple[dict[str, str], KubeApiServer, str]:
    with KubeApiServer() as kube:
        kube.put_secret(NAMESPACE, {"metadata": {"name": "executor-secrets"}, "data": {
            "STUDIO_DATABASE_URL": _b64(MASTER_URL), "STUDIO_SECRET_KEY": _b64(MASTER_KEY)}})
        kubelet = Kubelet(kube, tmp_path / "node", {"studio": [sys.executable, "-c", REPORTER]},
                          frozenset({IMAGE}), {"PATH": "/usr/bin:/bin"}).start()
        try:
            configuration = client.Configuration(host=kube.url)
            configuration.proxy = None
            api = client.ApiClient(configuration)
            settings = JobSettings(secret_name="executor-secrets", secret_env=SECRET_ENV,
                                   login_secret=logins is not None)
            substrate = KubernetesSubstrate(client.BatchV1Api(api), NAMESPACE, IMAGE, settings,
                                            core_api=client.CoreV1Api(api), logins=logins)
            handle = substrate.launch(execution_id)
            assert substrate.wait(handle, 60) is SubstrateStatus.SUCCEEDED
            env = _report(kubelet, handle.ref)["env"]
            assert isinstance(env, dict)
            return env, kube, handle.ref
        finally:
            kubelet.stop()


def test_the_pod_gets_its_own_login_and_never_the_master_secrets(
        tmp_path: Path, postgres_db: Database, postgres_url: str) -> None:
    # the positive control: without logins the same pod reads both witnesses
    control, _, _ = _run(tmp_path / "control", None, _new_id())
    assert control["STUDIO_DATABASE_URL"] == MASTER_URL
    assert control["STUDIO_SECRET_KEY"] == MASTER_KEY

    execution_id = _new_id()
    logins = ExecutionLogins(postgres_db, postgres_url)
    try:
        env, kube, job = _run(tmp_path / "logins", logins, execution_id)
        assert "STUDIO_SECRET_KEY" not in env
        assert not any(MASTER_KEY in value or "master-password" in value
                       for value in env.values())
        url = make_url(env["STUDIO_DATABASE_URL"])
        assert url.username == login_role(execution_id)
        secret = kube.secret(NAMESPACE, f"{job}-login")
        assert secret is not None
        assert list(secret["data"]) == ["STUDIO_DATABASE_URL"]
        owner = secret["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("Job", job)
        assert owner["uid"] == kube.job(NAMESPACE, job)["metadata"]["uid"]  # type: ignore[index]
        # the Job finished: its login is gone
        with postgres_db.engine.begin() as connection:
            assert connection.execute(text("SELECT count(*) FROM pg_roles WHERE rolname = :r"),
                                      {"r": url.username}).scalar() == 0
    finally:
        logins.revoke(execution_id)


def test_the_issued_login_connects_as_its_own_role(postgres_db: Database,
                                                   postgres_url: str) -> None:
    execution_id = str(uuid.uuid4())
    logins = ExecutionLogins(postgres_db, postgres_url)
    try:
        issued = logins.issue(execution_id, 600)
        engine = create_engine(issued.url.get_secret_value())
        with engine.begin() as connection:
            assert connection.execute(text("SELECT current_user")).scalar() == issued.role
            assert connection.execute(text("SELECT studio_login_execution()")).scalar() \
                == execution_id
        engine.dispose()
    finally:
        logins.revoke(execution_id)


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: double\n  cluster:\n    server: {server}\n"
        "users:\n- name: worker\n  user:\n    token: worker-token\n"
        "contexts:\n- name: double\n  context:\n    cluster: double\n    user: worker\n"
        "current-context: double\n")
    return path


def test_the_worker_hands_the_pod_the_stored_github_token_it_may_have(
        tmp_path: Path, postgres_db: Database, postgres_url: str) -> None:
    """Built the way the worker builds it (``kubernetes_substrate`` from the settings): the
    token stored (encrypted) in the database reaches the pod through its login Secret, decrypted
    by the worker; the key that decrypted it does not."""
    stored = "ghs_StoredIntegrationToken0123456789"
    settings = studio_settings(tmp_path / "data", database_url=postgres_url,
                               secret_key=MASTER_KEY, executor="kubernetes",
                               kube_image=IMAGE, kube_namespace=NAMESPACE,
                               kube_secret_name="executor-secrets",
                               kube_execution_logins=True)
    IntegrationRepository(postgres_db, settings).set_github(
        api_url=None, token=SecretStr(stored))
    execution_id = _new_id()
    with KubeApiServer() as kube:
        kube.put_secret(NAMESPACE, {"metadata": {"name": "executor-secrets"}, "data": {
            "STUDIO_DATABASE_URL": _b64(MASTER_URL), "STUDIO_SECRET_KEY": _b64(MASTER_KEY),
            "STUDIO_GITHUB_TOKEN": _b64("ghs_executor_secret_not_used")}})
        kubelet = Kubelet(kube, tmp_path / "node", {"studio": [sys.executable, "-c", REPORTER]},
                          frozenset({IMAGE}), {"PATH": "/usr/bin:/bin"}).start()
        configured = settings.model_copy(update={
            "kubeconfig": _kubeconfig(tmp_path / "kubeconfig", kube.url)})
        try:
            substrate = kubernetes_substrate(configured, github_token=True)
            handle = substrate.launch(execution_id)
            assert substrate.wait(handle, 60) is SubstrateStatus.SUCCEEDED
            env = _report(kubelet, handle.ref)["env"]
            assert isinstance(env, dict)
        finally:
            kubelet.stop()
            ExecutionLogins(postgres_db, postgres_url).revoke(execution_id)
    assert env["STUDIO_GITHUB_TOKEN"] == stored
    assert "STUDIO_SECRET_KEY" not in env
    assert make_url(env["STUDIO_DATABASE_URL"]).username == login_role(execution_id)
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
            for e in kube.job(NAMESPACE, handle.ref)["spec"]["template"]["spec"]  # type: ignore[index]
            ["containers"][0]["env"] if "valueFrom" in e}
    assert {name for name, secret in refs.items() if secret == f"{handle.ref}-login"} == {
        "STUDIO_DATABASE_URL", "STUDIO_GITHUB_TOKEN"}
    # the executor Secret: the providers' credentials only
    assert not {name for name, secret in refs.items() if secret == "executor-secrets"
                and name.startswith("STUDIO_")}


def test_the_worker_hands_the_pod_the_mcp_servers_its_agent_names_and_no_other(
        tmp_path: Path, postgres_db: Database, postgres_url: str) -> None:
    """The stored MCP servers an execution's agent names reach its pod decrypted by the worker
    (``STUDIO_EXECUTION_MCP`` in the login Secret); another stored server's secret (the
    witness) does not, and neither does the key that decrypted them."""
    settings = studio_settings(tmp_path / "data", database_url=postgres_url,
                               secret_key=MASTER_KEY, executor="kubernetes",
                               kube_image=IMAGE, kube_namespace=NAMESPACE,
                               kube_secret_name="executor-secrets",
                               kube_execution_logins=True)
    servers = McpServerRepository(postgres_db, settings)
    servers.create("docs", {"transport": "http", "url": "https://mcp.example.com/mcp",
                            "headers": {"Authorization": "Bearer named-server-secret"}})
    servers.create("other", {"transport": "http", "url": "https://other.example.com/mcp",
                             "headers": {"Authorization": "Bearer other-server-witness"}})
    request = ExecutionRequest(provider="codex", model="gpt-5.1", prompt="p",
                               repo_url="https://github.com/acme/widgets",
                               profile=agent_profile("codex", "gpt-5.1", mcp_servers=["docs"]))
    execution_id = create_execution(postgres_db, request, Redactor(), settings=settings)
    handed = handed_secrets(settings, execution_id)
    # the positive control: the witness is stored, and the worker could decrypt it
    assert "other-server-witness" in json.dumps(
        McpServerRepository(postgres_db, settings).resolve(["other"]).model_dump())
    with KubeApiServer() as kube:
        kube.put_secret(NAMESPACE, {"metadata": {"name": "executor-secrets"}, "data": {
            "STUDIO_SECRET_KEY": _b64(MASTER_KEY)}})
        kubelet = Kubelet(kube, tmp_path / "node", {"studio": [sys.executable, "-c", REPORTER]},
                          frozenset({IMAGE}), {"PATH": "/usr/bin:/bin"}).start()
        configured = settings.model_copy(update={
            "kubeconfig": _kubeconfig(tmp_path / "kubeconfig", kube.url)})
        try:
            substrate = kubernetes_substrate(configured, github_token=False, handed=handed)
            handle = substrate.launch(execution_id)
            assert substrate.wait(handle, 60) is SubstrateStatus.SUCCEEDED
            env = _report(kubelet, handle.ref)["env"]
            assert isinstance(env, dict)
        finally:
            kubelet.stop()
            ExecutionLogins(postgres_db, postgres_url).revoke(execution_id)
    pod_settings = studio_settings(execution_mcp=env["STUDIO_EXECUTION_MCP"])
    config = handed_mcp(pod_settings.execution_mcp, ["docs"])  # type: ignore[arg-type]
    assert config.servers["docs"].headers == {  # type: ignore[union-attr]
        "Authorization": "Bearer named-server-secret"}
    assert not any("other-server-witness" in value or MASTER_KEY in value
                   for value in env.values())
    assert "STUDIO_GITHUB_TOKEN" not in env and "STUDIO_SECRET_KEY" not in env


def test_a_job_whose_login_cannot_be_issued_is_deleted(tmp_path: Path,
                                                       sqlite_db: Database) -> None:
    """Logins need PostgreSQL: on SQLite the launch fails with ``config_error`` and the Job it
    created is deleted, instead of a pod waiting for its login Secret until its deadline."""
    with KubeApiServer() as kube:
        configuration = client.Configuration(host=kube.url)
        configuration.proxy = None
        api = client.ApiClient(configuration)
        substrate = KubernetesSubstrate(
            client.BatchV1Api(api), NAMESPACE, IMAGE,
            JobSettings(secret_name="executor-secrets", secret_env=SECRET_ENV,
                        login_secret=True),
            core_api=client.CoreV1Api(api), logins=ExecutionLogins(sqlite_db, "sqlite://"))
        execution_id = _new_id()
        with pytest.raises(ExecutionLoginError) as refused:
            substrate.launch(execution_id)
        assert refused.value.details == {"reason": "not_postgresql"}
        created = [r for r in kube.requests("POST") if r.path.endswith("/jobs")]
        assert len(created) == 1  # the Job was created (the positive control) ...
        name = created[0].body["metadata"]["name"]  # type: ignore[index]
        assert kube.job(NAMESPACE, name) is None  # ... and deleted again
        assert not [r for r in kube.requests("POST") if r.path.endswith("/secrets")]


def test_a_login_that_cannot_be_dropped_does_not_fail_the_supervision(
        caplog: pytest.LogCaptureFixture) -> None:
    """The database is unreachable when the worker drops a login (here: a closed port): the
    cancel still succeeds, with a warning; the login expires on its own and the reaper drops
    it."""
    with KubeApiServer() as kube:
        configuration = client.Configuration(host=kube.url)
        configuration.proxy = None
        api = client.ApiClient(configuration)
        logins = ExecutionLogins.for_url("postgresql+psycopg://nobody@127.0.0.1:1/none")
        substrate = KubernetesSubstrate(client.BatchV1Api(api), NAMESPACE, IMAGE,
                                        JobSettings(login_secret=True),
                                        core_api=client.CoreV1Api(api), logins=logins)
        execution_id = _new_id()
        handle = Handle("kubernetes", execution_id, f"studio-exec-{execution_id[:8]}", NAMESPACE)
        substrate.cancel(handle)  # no such Job (404), then the login's drop fails
    assert "was not dropped (OperationalError)" in caplog.text
