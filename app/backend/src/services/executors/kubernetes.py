"""The Kubernetes substrate: one batch/v1 Job per execution, through the official client.

Submitting, watching and deleting live here; the manifest comes from the pure
:func:`services.executors.pod_manifest.build_job`. The substrate is handed a configured
``BatchV1Api`` (in-cluster config in production, any ``Configuration(host=...)`` in tests).

* ``launch`` creates the Job; a 409 for a running Job of the *same* execution means it was
  launched already (a redelivered task): the Job is adopted. A *finished* Job of the same
  execution (its pod was killed; the reaper re-dispatched the execution) is deleted and the Job
  created again, to resume from the checkpoint.
* ``status`` reads the Job; a Job that no longer exists (deleted, or removed by its TTL)
  is ``unknown``.
* ``wait`` lists the execution's Job, then watches it from that list's resourceVersion, so no
  transition between the two is lost.
* ``cancel`` deletes the Job with foreground propagation (the Job goes once its pod has).
* While the Job is pending, its pod is read (at most every ``PENDING_CHECK_S``) for an image that
  cannot be pulled: that fails the wait with reason ``image_pull_failure``.

API failures become :class:`~services.execution.errors.SubstrateError` (code ``substrate_error``)
whose ``details["reason"]`` is one of ``invalid``, ``unauthorized``, ``forbidden``,
``not_found``, ``conflict``, ``name_conflict``, ``quota_exceeded`` (a 403 from a ResourceQuota),
``image_pull_failure``, ``throttled``, ``server_error``, ``api_error``, ``unreachable``;
``throttled``, ``server_error`` and ``unreachable`` are retryable.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping
from typing import Any, Protocol

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException
from pydantic import SecretStr

from services.db.execution_logins import ExecutionLogin
from services.db.session import DatabaseError
from services.execution.errors import ConfigError, SubstrateError
from services.executors.base import Handle, SubstrateStatus
from services.executors.pod_manifest import (
    DATABASE_URL,
    EXECUTION_ID_LABEL,
    JobSettings,
    build_job,
    execution_selector,
    job_name,
    login_secret,
    login_secret_name,
)

log = logging.getLogger(__name__)

_REASONS = {
    400: "invalid",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    422: "invalid",
    429: "throttled",
}
# Extra seconds the client waits on a watch beyond the server-side timeout before giving up.
_WATCH_READ_SLACK_S = 10
# While a Job is pending, how long one watch lasts before its pod is read for pull failures.
PENDING_CHECK_S = 15
# How long a relaunch waits for the finished Job it deleted to be gone.
RELAUNCH_WAIT_S = 60.0
_IMAGE_PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName",
                       "ErrImageNeverPull")


# How long a login outlives its Job's deadline (scheduling, image pull, the last writes).
LOGIN_SLACK_S = 900


class LoginIssuer(Protocol):
    """Per-execution database logins (:class:`services.db.execution_logins.ExecutionLogins`)."""

    def issue(self, execution_id: str, valid_for_s: int) -> ExecutionLogin: ...

    def revoke(self, execution_id: str) -> None: ...


class KubernetesSubstrate:
    """Runs each execution as a Job in ``namespace``."""

    def __init__(
        self,
        batch_api: client.BatchV1Api,
        namespace: str,
        image: str,
        job_settings: JobSettings | None = None,
        *,
        core_api: client.CoreV1Api | None = None,
        logins: LoginIssuer | None = None,
        handed: Mapping[str, SecretStr] | None = None,
    ) -> None:
        self._api = batch_api
        self._logins = logins
        # Secrets the worker resolved for this execution, handed in the login Secret too
        # (the keys of ``job_settings.login_secret_keys``).
        self._handed = dict(handed or {})
        self._core = core_api
        # Job name -> (status, resourceVersion) where the last wait stopped watching.
        self._resume: dict[str, tuple[SubstrateStatus, str | None]] = {}
        self._namespace = namespace
        self._image = image
        self._settings = job_settings or JobSettings()

    @property
    def name(self) -> str:
        return "kubernetes"

    def manifest(self, execution_id: str) -> client.V1Job:
        """The Job this substrate submits for ``execution_id``."""
        try:
            return build_job(
                execution_id, image=self._image, namespace=self._namespace, settings=self._settings
            )
        except ValueError as exc:
            raise SubstrateError(str(exc), details={"reason": "invalid"}) from exc

    def launch(self, execution_id: str) -> Handle:
        job = self.manifest(execution_id)
        name = job_name(execution_id)
        handle = Handle(self.name, execution_id, name, self._namespace)
        if self._create(job, name):
            return handle
        existing = self._check_same_execution(handle)
        if not job_status(existing).finished:
            log.info("kubernetes substrate: job %s exists already (adopted)", name)
            return handle
        log.info("kubernetes substrate: job %s finished earlier; launching it again", name)
        self.cancel(handle)
        deadline = time.monotonic() + RELAUNCH_WAIT_S
        while not self._create(job, name):
            if time.monotonic() > deadline:
                raise SubstrateError(f"job {name} is still being deleted",
                                     details={"reason": "conflict", "job": name}, retryable=True)
            # A foreground deletion keeps the (finished) Job until its pod is gone.
            time.sleep(1.0)
        return handle

    def _create(self, job: client.V1Job, name: str) -> bool:
        """Create the Job (and its login Secret); ``False`` when one of that name exists."""
        try:
            created = self._api.create_namespaced_job(self._namespace, job)
        except ApiException as exc:
            if exc.status != 409:
                raise _api_error(exc, "create", name) from exc
            return False
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "create", name) from exc
        log.info("kubernetes substrate: created job %s", name)
        if self._settings.login_secret:
            try:
                self._login_secret(created, name)
            except Exception:
                # a Job without its login would wait for its Secret until its deadline
                self.cancel(Handle(self.name, _execution_of(created), name, self._namespace))
                raise
        return True

    def _login_secret(self, job: client.V1Job, name: str) -> None:
        """The Job's own database login, in a Secret the Job owns (deleted with it); the pod
        waits for it (a missing Secret keeps its container from starting)."""
        execution_id = _execution_of(job)
        if self._logins is None or self._core is None:
            raise SubstrateError("execution logins need a login issuer and the core API",
                                 details={"reason": "invalid", "job": name})
        login = self._logins.issue(execution_id, self._settings.active_deadline_seconds
                                   + LOGIN_SLACK_S)
        secret_name = login_secret_name(execution_id)
        try:
            secret = login_secret(job, {DATABASE_URL: login.url, **self._handed})
        except ValueError as exc:
            raise SubstrateError(str(exc), details={"reason": "invalid", "job": name}) from exc
        try:
            self._core.create_namespaced_secret(self._namespace, secret)
        except ApiException as exc:
            raise _api_error(exc, "create secret", secret_name) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "create secret", secret_name) from exc

    def status(self, handle: Handle) -> SubstrateStatus:
        try:
            # The Job itself, not its status subresource: one RBAC grant (get jobs) fewer.
            job = self._api.read_namespaced_job(handle.ref, self._ns(handle))
        except ApiException as exc:
            if exc.status == 404:
                return SubstrateStatus.UNKNOWN
            raise _api_error(exc, "read", handle.ref) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "read", handle.ref) from exc
        return job_status(job)

    def wait(self, handle: Handle, timeout: float) -> SubstrateStatus:
        deadline = time.monotonic() + max(timeout, 0.0)
        # A supervisor waits in slices: the next slice watches on from where this one stopped
        # instead of listing again.
        resumed = self._resume.pop(handle.ref, None)
        status, version = resumed if resumed is not None else self._list(handle)
        while not status.finished and status is not SubstrateStatus.UNKNOWN:
            remaining = math.ceil(deadline - time.monotonic())
            if remaining <= 0:
                break
            if status is SubstrateStatus.PENDING:
                self._check_pod(handle)
                remaining = min(remaining, PENDING_CHECK_S)
            try:
                status, version = self._watch(handle, version, remaining, status)
            except ApiException as exc:
                if exc.status != 410:
                    raise _api_error(exc, "watch", handle.ref) from exc
                status, version = self._list(handle)  # our resourceVersion expired
            except urllib3.exceptions.HTTPError as exc:
                raise _unreachable(exc, "watch", handle.ref) from exc
        if status.finished or status is SubstrateStatus.UNKNOWN:
            self._revoke(handle)  # the pod is done: its login goes (a relaunch issues anew)
        elif version:
            self._resume[handle.ref] = (status, version)
        return status

    def _revoke(self, handle: Handle) -> None:
        """Drop the execution's login; a failure only leaves it to expire (the reaper drops
        expired logins), it does not fail the supervision."""
        if self._logins is None:
            return
        try:
            self._logins.revoke(handle.execution_id)
        except (DatabaseError, ConfigError) as exc:
            log.warning("kubernetes substrate: the login of %s was not dropped (%s); it "
                        "expires with its deadline", handle.ref, type(exc).__name__)

    def cancel(self, handle: Handle) -> None:
        self._resume.pop(handle.ref, None)
        try:
            # 37.x returns the API server's answer as a plain dict; nothing in it is needed.
            self._api.delete_namespaced_job(
                handle.ref, self._ns(handle), propagation_policy="Foreground"
            )
        except ApiException as exc:
            if exc.status == 404:
                self._revoke(handle)
                return  # already gone: cancelling is idempotent
            raise _api_error(exc, "delete", handle.ref) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "delete", handle.ref) from exc
        log.info("kubernetes substrate: job %s deleted (cancel)", handle.ref)
        self._revoke(handle)

    def _ns(self, handle: Handle) -> str:
        return handle.namespace or self._namespace

    def _check_same_execution(self, handle: Handle) -> client.V1Job:
        try:
            existing = self._api.read_namespaced_job(handle.ref, self._namespace)
        except ApiException as exc:
            raise _api_error(exc, "read", handle.ref) from exc
        labels = (existing.metadata.labels if existing.metadata else None) or {}
        if labels.get(EXECUTION_ID_LABEL) != handle.execution_id:
            raise SubstrateError(
                f"job {handle.ref} exists for another execution",
                details={"reason": "name_conflict", "job": handle.ref},
            )
        return existing

    def _check_pod(self, handle: Handle) -> None:
        """Raise ``image_pull_failure`` when the Job's pod cannot pull its image."""
        if self._core is None:
            return
        try:
            pods = self._core.list_namespaced_pod(
                self._ns(handle), label_selector=execution_selector(handle.execution_id)
            )
        except ApiException as exc:
            raise _api_error(exc, "list pods of", handle.ref) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "list pods of", handle.ref) from exc
        for pod in pods.items:
            for container in (pod.status.container_statuses if pod.status else None) or []:
                waiting = container.state.waiting if container.state else None
                if waiting is not None and waiting.reason in _IMAGE_PULL_REASONS:
                    raise SubstrateError(
                        f"job {handle.ref}: image {container.image} cannot be pulled "
                        f"({waiting.reason}: {(waiting.message or '')[:300]})",
                        details={"reason": "image_pull_failure", "job": handle.ref,
                                 "image": container.image},
                    )

    def _list(self, handle: Handle) -> tuple[SubstrateStatus, str | None]:
        """The Job's status now, and the resourceVersion to watch from."""
        try:
            jobs = self._api.list_namespaced_job(
                self._ns(handle), label_selector=execution_selector(handle.execution_id)
            )
        except ApiException as exc:
            raise _api_error(exc, "list", handle.ref) from exc
        except urllib3.exceptions.HTTPError as exc:
            raise _unreachable(exc, "list", handle.ref) from exc
        version = jobs.metadata.resource_version if jobs.metadata else None
        for job in jobs.items:
            if job.metadata is not None and job.metadata.name == handle.ref:
                return job_status(job), version
        return SubstrateStatus.UNKNOWN, version

    def _watch(
        self, handle: Handle, version: str | None, seconds: int, status: SubstrateStatus
    ) -> tuple[SubstrateStatus, str | None]:
        """Follow the Job from ``status`` until it finishes, is deleted, or ``seconds`` pass."""
        # kubernetes.watch is not annotated; its events are dicts with "type" and "object".
        watcher = watch.Watch()  # type: ignore[no-untyped-call]
        arguments: dict[str, Any] = {
            "label_selector": execution_selector(handle.execution_id),
            "timeout_seconds": seconds,
            "_request_timeout": seconds + _WATCH_READ_SLACK_S,
        }
        if version:
            arguments["resource_version"] = version
        events = watcher.stream(  # type: ignore[no-untyped-call]
            self._api.list_namespaced_job, self._ns(handle), **arguments
        )
        try:
            for event in events:
                job = event["object"]
                if not isinstance(job, client.V1Job) or job.metadata is None:
                    continue
                version = job.metadata.resource_version or version
                if job.metadata.name != handle.ref:
                    continue
                deleted = event["type"] == "DELETED"
                status = SubstrateStatus.UNKNOWN if deleted else job_status(job)
                if status.finished or status is SubstrateStatus.UNKNOWN:
                    break
        finally:
            events.close()  # releases the streaming connection
        return status, version


def _execution_of(job: client.V1Job) -> str:
    labels = (job.metadata.labels if job.metadata is not None else None) or {}
    return str(labels.get(EXECUTION_ID_LABEL, ""))


def job_status(job: client.V1Job) -> SubstrateStatus:
    """What a Job's status says: its terminal conditions first, then its pod counters."""
    status = job.status
    if status is None:
        return SubstrateStatus.PENDING
    for condition in status.conditions or []:
        if condition.status != "True":
            continue
        if condition.type in ("Complete", "SuccessCriteriaMet"):
            return SubstrateStatus.SUCCEEDED
        if condition.type in ("Failed", "FailureTarget"):
            return SubstrateStatus.FAILED
    if status.succeeded:
        return SubstrateStatus.SUCCEEDED
    if status.failed:
        return SubstrateStatus.FAILED  # backoffLimit is 0: one failed pod fails the Job
    if status.active:
        # ``ready`` counts pods whose containers run; servers that omit it get the benefit of
        # the doubt.
        return SubstrateStatus.PENDING if status.ready == 0 else SubstrateStatus.RUNNING
    return SubstrateStatus.PENDING


def _api_error(exc: ApiException, operation: str, name: str) -> SubstrateError:
    code = int(exc.status or 0)
    reason = _REASONS.get(code, "server_error" if code >= 500 else "api_error")
    message = _status_message(exc.body) or str(exc.reason or "")
    if code == 403 and "exceeded quota" in message:
        reason = "quota_exceeded"  # the ResourceQuota admission answers 403 Forbidden
    return SubstrateError(
        f"kubernetes {operation} of job {name} failed: HTTP {code} {message}".strip(),
        details={"reason": reason, "status": code, "operation": operation, "job": name},
        retryable=reason in ("throttled", "server_error"),
    )


def _unreachable(exc: Exception, operation: str, name: str) -> SubstrateError:
    return SubstrateError(
        f"kubernetes {operation} of job {name} failed: API server unreachable ({exc})",
        details={"reason": "unreachable", "operation": operation, "job": name},
        retryable=True,
    )


def _status_message(body: object) -> str:
    """The ``message`` of a ``Status`` body, capped; empty when the body is not one."""
    if not isinstance(body, str | bytes):
        return ""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    return str(message)[:500] if message else ""
