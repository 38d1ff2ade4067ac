"""The Kubernetes substrate through the real ``kubernetes`` client against the API double.

Nothing of the client is patched: it speaks HTTP to :class:`tests.support.kube_api.KubeApiServer`,
which plays the API server and, through its test hooks, the Job controller.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import kubernetes_validate
import pytest

from services.execution.errors import ErrorCode, SubstrateError
from services.executors.base import Handle, Substrate, SubstrateStatus
from services.executors.kubernetes import KubernetesSubstrate
from services.executors.pod_manifest import EXECUTION_ID_LABEL, job_name, job_to_dict
from tests.integration.executors.conftest import IMAGE, NAMESPACE, batch_api_for
from tests.support.kube_api import KubeApiServer, Recorded

EXECUTION_ID = "0f3c2a1e-1111-4222-8333-444455556666"
# Same first twelve alphanumerics, so the same Job name: a different execution all the same.
TWIN_EXECUTION_ID = "0f3c2a1e-1111-4999-8333-444455556666"
PATIENCE_S = 30.0


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.01)


def watches(kube_api: KubeApiServer) -> list[Recorded]:
    return [r for r in kube_api.requests("GET") if r.query.get("watch") == "true"]


def watching(kube_api: KubeApiServer) -> bool:
    return bool(watches(kube_api))


def in_background(action: Callable[[], None]) -> threading.Thread:
    thread = threading.Thread(target=action, daemon=True)
    thread.start()
    return thread


def test_is_a_substrate(substrate: KubernetesSubstrate) -> None:
    assert isinstance(substrate, Substrate)
    assert substrate.name == "kubernetes"


def test_launch_submits_the_job_built_for_the_execution(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    handle = substrate.launch(EXECUTION_ID)

    assert handle == Handle("kubernetes", EXECUTION_ID, job_name(EXECUTION_ID), NAMESPACE)
    (post,) = kube_api.requests("POST")
    assert post.path == f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    assert post.body == job_to_dict(substrate.manifest(EXECUTION_ID))
    assert post.body is not None
    kubernetes_validate.validate(post.body, "1.33", strict=True)  # what went over the wire
    stored = kube_api.job(NAMESPACE, handle.ref)
    assert stored is not None
    assert stored["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    assert substrate.status(handle) is SubstrateStatus.PENDING


@pytest.mark.parametrize(
    ("finish", "expected"),
    [("mark_succeeded", SubstrateStatus.SUCCEEDED), ("mark_failed", SubstrateStatus.FAILED)],
)
def test_wait_watches_the_job_to_its_end(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer, finish: str, expected: SubstrateStatus
) -> None:
    handle = substrate.launch(EXECUTION_ID)

    def controller() -> None:  # the Job controller, while the substrate is already watching
        wait_for(lambda: watching(kube_api), "the watch")
        kube_api.mark_running(NAMESPACE, handle.ref)
        getattr(kube_api, finish)(NAMESPACE, handle.ref)

    flipper = in_background(controller)
    assert substrate.wait(handle, timeout=PATIENCE_S) is expected
    flipper.join()

    (watch,) = watches(kube_api)
    assert watch.query["labelSelector"] == (
        f"app.kubernetes.io/name=studio-executor,{EXECUTION_ID_LABEL}={EXECUTION_ID}"
    )
    assert watch.query["resourceVersion"]  # from the list that came before: no lost event
    assert substrate.status(handle) is expected


def test_an_expired_watch_lists_and_watches_again(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    handle = substrate.launch(EXECUTION_ID)
    kube_api.fail_next(410, when=lambda request: request.query.get("watch") == "true")

    def controller() -> None:
        wait_for(lambda: len(watches(kube_api)) == 2, "the second watch")
        kube_api.mark_succeeded(NAMESPACE, handle.ref)

    flipper = in_background(controller)
    assert substrate.wait(handle, timeout=PATIENCE_S) is SubstrateStatus.SUCCEEDED
    flipper.join()
    lists = [r for r in kube_api.requests("GET") if r.query.get("watch") != "true"]
    assert len(lists) == 2  # the resourceVersion expired: listed afresh before watching again


def test_wait_returns_the_current_status_when_time_is_up(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    handle = substrate.launch(EXECUTION_ID)
    kube_api.mark_running(NAMESPACE, handle.ref)
    assert substrate.wait(handle, timeout=1) is SubstrateStatus.RUNNING
    assert substrate.wait(handle, timeout=0) is SubstrateStatus.RUNNING


def test_relaunch_of_the_same_execution_is_idempotent(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    first = substrate.launch(EXECUTION_ID)
    kube_api.mark_running(NAMESPACE, first.ref)
    again = substrate.launch(EXECUTION_ID)  # a redelivered task

    assert again == first
    assert len(kube_api.requests("POST")) == 2  # the second one was answered 409
    assert substrate.status(again) is SubstrateStatus.RUNNING  # the running Job was kept


def test_a_name_taken_by_another_execution_is_an_error(
    substrate: KubernetesSubstrate,
) -> None:
    substrate.launch(EXECUTION_ID)
    assert job_name(TWIN_EXECUTION_ID) == job_name(EXECUTION_ID)
    with pytest.raises(SubstrateError) as caught:
        substrate.launch(TWIN_EXECUTION_ID)
    assert caught.value.details["reason"] == "name_conflict"


def test_cancel_deletes_the_job_and_ends_a_wait(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    handle = substrate.launch(EXECUTION_ID)
    kube_api.mark_running(NAMESPACE, handle.ref)
    outcome: list[SubstrateStatus] = []
    waiter = in_background(lambda: outcome.append(substrate.wait(handle, timeout=PATIENCE_S)))
    wait_for(lambda: watching(kube_api), "the watch")

    substrate.cancel(handle)
    waiter.join()

    assert kube_api.job(NAMESPACE, handle.ref) is None
    (delete,) = kube_api.requests("DELETE")
    assert delete.path.endswith(f"/jobs/{handle.ref}")
    assert delete.query["propagationPolicy"] == "Foreground"
    assert outcome == [SubstrateStatus.UNKNOWN]  # the watch saw it DELETED
    assert substrate.status(handle) is SubstrateStatus.UNKNOWN
    substrate.cancel(handle)  # cancelling again is a no-op (404 ignored)


Operation = Callable[[KubernetesSubstrate, Handle], object]
OPERATIONS: dict[str, tuple[str, Operation]] = {
    "launch": ("POST", lambda s, h: s.launch(h.execution_id)),
    "status": ("GET", lambda s, h: s.status(h)),
    "wait": ("GET", lambda s, h: s.wait(h, timeout=5)),
    "cancel": ("DELETE", lambda s, h: s.cancel(h)),
}


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
@pytest.mark.parametrize(
    ("http_status", "reason", "retryable"),
    [(500, "server_error", True), (503, "server_error", True), (429, "throttled", True),
     (403, "forbidden", False), (401, "unauthorized", False)],
)
def test_api_errors_become_substrate_errors(
    substrate: KubernetesSubstrate,
    kube_api: KubeApiServer,
    operation: str,
    http_status: int,
    reason: str,
    retryable: bool,
) -> None:
    handle = Handle("kubernetes", EXECUTION_ID, job_name(EXECUTION_ID), NAMESPACE)
    method, call = OPERATIONS[operation]
    kube_api.fail_next(http_status, method=method)
    with pytest.raises(SubstrateError) as caught:
        call(substrate, handle)
    error = caught.value
    assert error.code is ErrorCode.SUBSTRATE_ERROR
    assert error.details["reason"] == reason
    assert error.details["status"] == http_status
    assert error.retryable is retryable
    assert "injected failure" in error.message  # the API server's own message is kept


def test_an_unreachable_api_server_is_a_retryable_substrate_error() -> None:
    with KubeApiServer() as gone:
        url = gone.url
    api = batch_api_for(url)
    api.api_client.configuration.retries = 0
    substrate = KubernetesSubstrate(api, NAMESPACE, IMAGE)
    with pytest.raises(SubstrateError) as caught:
        substrate.launch(EXECUTION_ID)
    assert caught.value.details["reason"] == "unreachable"
    assert caught.value.retryable is True


def test_an_execution_id_unfit_for_kubernetes_is_refused(substrate: KubernetesSubstrate) -> None:
    with pytest.raises(SubstrateError) as caught:
        substrate.launch("not a label value")
    assert caught.value.details["reason"] == "invalid"


def test_waiting_in_slices_lists_once_and_watches_on(
    substrate: KubernetesSubstrate, kube_api: KubeApiServer
) -> None:
    handle = substrate.launch(EXECUTION_ID)
    kube_api.mark_running(NAMESPACE, handle.ref)
    assert substrate.wait(handle, timeout=1) is SubstrateStatus.RUNNING
    assert substrate.wait(handle, timeout=1) is SubstrateStatus.RUNNING
    lists = [r for r in kube_api.requests("GET")
             if r.path.endswith("/jobs") and r.query.get("watch") != "true"]
    assert len(lists) == 1  # the second slice watched on from the first one's resourceVersion
    assert len(watches(kube_api)) == 2
    assert watches(kube_api)[1].query["resourceVersion"] != ""
    kube_api.mark_succeeded(NAMESPACE, handle.ref)
    assert substrate.wait(handle, timeout=5) is SubstrateStatus.SUCCEEDED
