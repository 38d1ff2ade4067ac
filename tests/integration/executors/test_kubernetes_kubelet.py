"""The Kubernetes substrate with the API double's kubelet: what a pod really gets, how its status
comes back through the watch, what an unpullable image or a missing Secret looks like, quota
refusals, relaunching a failed Job, and deleting a Job killing its container."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from services.execution.errors import SubstrateError
from services.executors.base import SubstrateStatus
from services.executors.kubernetes import KubernetesSubstrate
from services.executors.pod_manifest import JobSettings, SecretEnv
from tests.integration.executors.conftest import IMAGE, NAMESPACE
from tests.support.kube_api import KubeApiServer
from tests.support.kubelet import Kubelet

EXECUTION_ID = "5a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
# Stands for `studio execute <id>`: reports what it got, then exits with the code in its
# argument's last character ("...-7" exits 7) or sleeps when the id ends in "sleep".
REPORTER = (
    "import json, os, sys, time\n"
    # /proc/self/environ: the environment as exec'd (Python adds LC_CTYPE to os.environ)
    "raw = open('/proc/self/environ', 'rb').read().decode().split(chr(0))\n"
    "env = dict(item.split('=', 1) for item in raw if item)\n"
    "report = {'env': env, 'cwd': os.getcwd(), 'argv': sys.argv[1:],\n"
    "          'home_empty': os.listdir(os.environ['HOME']) == []}\n"
    "open('report.json', 'w').write(json.dumps(report))\n"
    "if sys.argv[-1].endswith('sleep'):\n"
    "    time.sleep(300)\n"
    "sys.exit(int(sys.argv[-1][-1]) if sys.argv[-1][-1].isdigit() else 0)\n"
)
SECRET_ENV = (SecretEnv("STUDIO_DATABASE_URL"), SecretEnv("OPENAI_API_KEY", optional=True),
              SecretEnv("STUDIO_GITHUB_TOKEN", key="github-token"))


def _api(kube: KubeApiServer) -> client.ApiClient:
    configuration = client.Configuration(host=kube.url)
    configuration.proxy = None
    return client.ApiClient(configuration)


@pytest.fixture
def kube() -> Iterator[KubeApiServer]:
    with KubeApiServer() as server:
        server.put_secret(NAMESPACE, {"metadata": {"name": "executor-secrets"}, "data": {
            "STUDIO_DATABASE_URL": "cG9zdGdyZXNxbDovL2RiL3N0dWRpbw==",  # postgresql://db/studio
            "github-token": "Z2hzX3NlY3JldA=="}})  # ghs_secret
        yield server


@pytest.fixture
def kubelet(kube: KubeApiServer, tmp_path: Path) -> Iterator[Kubelet]:
    node = Kubelet(kube, tmp_path / "node", {"studio": [sys.executable, "-c", REPORTER]},
                   frozenset({IMAGE}), {"PATH": "/usr/bin:/bin"}).start()
    yield node
    node.stop()


def _substrate(kube: KubeApiServer, image: str = IMAGE,
               secret_name: str = "executor-secrets") -> KubernetesSubstrate:
    api = _api(kube)
    settings = JobSettings(secret_name=secret_name, secret_env=SECRET_ENV,
                           extra_env={"STUDIO_LOG_LEVEL": "INFO"})
    return KubernetesSubstrate(client.BatchV1Api(api), NAMESPACE, image, settings,
                               core_api=client.CoreV1Api(api))


def _report(kubelet: Kubelet, job: str) -> dict[str, object]:
    pod = next(name for name in kubelet.started if name.startswith(job))
    path = kubelet.root / "pods" / pod / "workspace" / "report.json"
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, kubelet.log(job)
        time.sleep(0.05)
    time.sleep(0.1)
    data: dict[str, object] = json.loads(path.read_text())
    return data


def test_the_pod_gets_exactly_its_specs_environment_and_volumes(
        kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube)
    handle = substrate.launch(EXECUTION_ID)
    assert substrate.wait(handle, 30) is SubstrateStatus.SUCCEEDED
    report = _report(kubelet, handle.ref)
    env = report["env"]
    assert isinstance(env, dict)
    pod_dir = kubelet.root / "pods" / kubelet.started[0]
    assert env == {
        "PATH": "/usr/bin:/bin",  # the image's
        "STUDIO_WORKSPACE_DIR": str(pod_dir / "workspace"), "STUDIO_SANDBOX": "required",
        "HOME": str(pod_dir / "home"), "TMPDIR": str(pod_dir / "tmp"),
        "STUDIO_LOG_LEVEL": "INFO",
        "STUDIO_REPO_MIRRORS": "false",  # a pod has no mirror to borrow from: a whole clone
        "STUDIO_DATABASE_URL": "postgresql://db/studio",  # secretKeyRef, resolved
        "STUDIO_GITHUB_TOKEN": "ghs_secret",  # from the key the ref names
    }  # OPENAI_API_KEY: optional and absent from the Secret, so left out
    assert report["cwd"] == str(pod_dir / "workspace")
    assert report["argv"] == ["execute", EXECUTION_ID]
    assert report["home_empty"] is True
    assert kube.job(NAMESPACE, handle.ref)["status"]["succeeded"] == 1  # type: ignore[index]


def test_a_failing_container_fails_the_job(kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube)
    handle = substrate.launch("5a1b2c3d-4e5f-4a6b-8c7d-000000000007")
    assert substrate.wait(handle, 30) is SubstrateStatus.FAILED


def test_deleting_the_job_kills_the_container(kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube)
    handle = substrate.launch("5a1b2c3d-4e5f-4a6b-8c7d-00000000sleep")
    assert substrate.wait(handle, 5) is SubstrateStatus.RUNNING
    _report(kubelet, handle.ref)
    pid = kubelet.pid(handle.ref)
    assert pid is not None and Path(f"/proc/{pid}").exists()
    substrate.cancel(handle)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text()[-60:]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert kube.job(NAMESPACE, handle.ref) is None
    assert substrate.wait(handle, 5) is SubstrateStatus.UNKNOWN


def test_an_image_that_cannot_be_pulled_is_a_substrate_error(
        kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube, image="registry.example.com/studio/missing:1")
    handle = substrate.launch(EXECUTION_ID)
    with pytest.raises(SubstrateError) as caught:
        substrate.wait(handle, 30)
    assert caught.value.details["reason"] == "image_pull_failure"
    assert "missing:1" in caught.value.message
    assert caught.value.retryable is False


def test_a_missing_secret_keeps_the_pod_waiting(kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube, secret_name="nowhere")
    handle = substrate.launch(EXECUTION_ID)
    assert substrate.wait(handle, 2) is SubstrateStatus.PENDING
    pods = client.CoreV1Api(_api(kube)).list_namespaced_pod(NAMESPACE)
    waiting = pods.items[0].status.container_statuses[0].state.waiting
    assert waiting.reason == "CreateContainerConfigError"
    assert kubelet.pid(handle.ref) is None  # never started


def test_a_failed_job_is_launched_again_and_a_running_one_adopted(
        kube: KubeApiServer, kubelet: Kubelet) -> None:
    substrate = _substrate(kube)
    sleeper = "5a1b2c3d-4e5f-4a6b-8c7d-00000000sleep"
    handle = substrate.launch(sleeper)
    assert substrate.wait(handle, 5) is SubstrateStatus.RUNNING
    first_pid = kubelet.pid(handle.ref)
    assert substrate.launch(sleeper) == handle  # a redelivery: adopted
    assert kubelet.pid(handle.ref) == first_pid and len(kubelet.started) == 1

    kubelet.kill(handle.ref)  # the node loses the container
    assert substrate.wait(handle, 30) is SubstrateStatus.FAILED
    assert substrate.launch(sleeper) == handle  # re-dispatched: the failed Job is replaced
    (delete,) = kube.requests("DELETE")
    assert delete.query["propagationPolicy"] == "Foreground"
    assert substrate.wait(handle, 5) is SubstrateStatus.RUNNING
    assert len(kubelet.started) == 2 and kubelet.pid(handle.ref) != first_pid


def test_a_quota_refusal_has_its_own_reason(kube: KubeApiServer) -> None:
    kube.fail_next(403, method="POST", message=(
        'jobs.batch "studio-exec-5a1b2c3d4e5f" is forbidden: exceeded quota: executors, '
        "requested: count/jobs.batch=1, used: count/jobs.batch=20, limited: count/jobs.batch=20"))
    with pytest.raises(SubstrateError) as caught:
        _substrate(kube).launch(EXECUTION_ID)
    assert caught.value.details["reason"] == "quota_exceeded"
    assert "exceeded quota" in caught.value.message
    kube.fail_next(403, method="POST", message='jobs.batch is forbidden: User "x" cannot create')
    with pytest.raises(SubstrateError) as forbidden:
        _substrate(kube).launch(EXECUTION_ID)
    assert forbidden.value.details["reason"] == "forbidden"
