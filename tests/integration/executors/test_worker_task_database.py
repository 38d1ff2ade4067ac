"""A worker task opens the database once (:mod:`services.worker.task_database`): the admission,
the GitHub token rule of a Kubernetes Job and the Job's supervision share one engine and one
schema check, on the real PostgreSQL, through the API double and its kubelet."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.redaction import Redactor
from services.db.session import Database
from services.runs.request import ExecutionRequest, create_execution
from services.settings import StudioSettings, get_settings
from services.worker.admission import Admission
from services.worker.handlers import handle_execute_node
from services.worker.payloads import ExecuteNodePayload, parse
from tests.integration.executors.conftest import IMAGE, NAMESPACE
from tests.support.database_use import database_use
from tests.support.kube_api import KubeApiServer
from tests.support.kubelet import Kubelet

# Stands for `studio execute <id>` in the pod: exits 0 at once.
DONE = "import sys; sys.exit(0)\n"


@pytest.fixture
def kube() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        server.put_secret(NAMESPACE, {"metadata": {"name": "executor-secrets"}, "data": {
            name: base64.b64encode(b"unused-in-this-pod").decode()
            for name in ("STUDIO_DATABASE_URL", "STUDIO_SECRET_KEY", "STUDIO_GITHUB_TOKEN")}})
        yield server


@pytest.fixture
def kube_settings(tmp_path: Path, postgres_url: str, kube: KubeApiServer,
                  monkeypatch: pytest.MonkeyPatch) -> Iterator[StudioSettings]:
    """The worker's settings from its environment (``run_child`` reads them there)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: double\n  cluster:\n    server: {kube.url}\n"
        "users:\n- name: worker\n  user:\n    token: worker-token\n"
        "contexts:\n- name: double\n  context:\n    cluster: double\n    user: worker\n"
        "current-context: double\n")
    for name, value in {"DATABASE_URL": postgres_url, "EXECUTOR": "kubernetes",
                        "KUBE_IMAGE": IMAGE, "KUBE_NAMESPACE": NAMESPACE,
                        "KUBE_SECRET_NAME": "executor-secrets", "KUBECONFIG": str(kubeconfig),
                        "DATA_DIR": str(tmp_path / "data"),
                        "GITHUB_GIT_ORIGINS": "https://github.com"}.items():
        monkeypatch.setenv(f"STUDIO_{name}", value)
    get_settings.cache_clear()
    yield get_settings()
    monkeypatch.undo()
    get_settings.cache_clear()


def test_a_worker_task_opens_the_database_once(tmp_path: Path, kube: KubeApiServer,
                                               kube_settings: StudioSettings,
                                               postgres_db: Database) -> None:
    execution_id = create_execution(postgres_db, ExecutionRequest(
        provider="replay", prompt="p", repo_url="https://github.com/acme/widgets",
        pull_request=False, script={"turns": []}), Redactor(), settings=kube_settings)
    kubelet = Kubelet(kube, tmp_path / "node", {"studio": [sys.executable, "-c", DONE]},
                      frozenset({IMAGE}), {"PATH": "/usr/bin:/bin"}).start()
    try:
        with database_use() as use:
            decision = handle_execute_node(
                parse(ExecuteNodePayload, {"execution_id": execution_id}), kube_settings)
    finally:
        kubelet.stop()
    assert decision is Admission.RUN
    # the positive control: the Job was created, ran and was watched from the database (its
    # cancel request read between slices), so every step that once opened its own engine ran
    assert [r for r in kube.requests("POST") if r.path.endswith("/jobs")]
    assert any(name for name in kubelet.started)
    assert use.statements, "the listener saw no statement"
    assert use.engines == 1
    assert use.schema_checks == 1
