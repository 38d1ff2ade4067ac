"""Stands for the Kubernetes API server (kube-apiserver), for the batch/v1 Job endpoints only.

No kube-apiserver, kind or k3s runs on these machines, so the real ``kubernetes`` client is pointed
(``Configuration(host=server.url)``) at this small stdlib HTTP server on 127.0.0.1. It implements
what :mod:`services.executors.kubernetes` calls, with the API server's wire behaviour:

* ``POST /apis/batch/v1/namespaces/{ns}/jobs``: stores the Job (uid, resourceVersion,
  creationTimestamp, empty status); 409 ``AlreadyExists`` for a taken name;
* ``GET .../jobs/{name}`` and ``GET .../jobs/{name}/status``: the Job, or 404 ``NotFound``;
* ``DELETE .../jobs/{name}``: removes it and answers a ``Status`` of success (what the server
  sends when an object without finalizers is deleted at once);
* ``GET .../jobs?labelSelector=...``: a ``JobList`` with the collection's resourceVersion; with
  ``watch=true``, a chunked stream of newline-delimited watch events (``ADDED`` / ``MODIFIED`` /
  ``DELETED``): from the given ``resourceVersion`` on, or synthetic ``ADDED`` events for the
  current objects without one, until ``timeoutSeconds``.

And for the kubelet (:mod:`tests.support.kubelet`), which turns this double into a small cluster:

* ``GET /api/v1/namespaces/{ns}/pods?labelSelector=...``: a ``PodList`` of the pods the kubelet
  reported (:meth:`KubeApiServer.put_pod`);
* ``POST /api/v1/namespaces/{ns}/secrets``: stores a Secret (``data`` base64, or
  ``stringData``), which the kubelet resolves ``secretKeyRef`` from.

Test hooks: :meth:`KubeApiServer.set_status` and the ``mark_*`` helpers play the Job controller;
:meth:`KubeApiServer.fail_next` makes the next matching requests answer an error status;
:attr:`KubeApiServer.job_listeners` are told of every Job created or deleted (the kubelet).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

_JOBS = re.compile(
    r"^/apis/batch/v1/namespaces/(?P<ns>[^/]+)/jobs(?:/(?P<name>[^/]+))?(?P<status>/status)?$"
)
_CORE = re.compile(r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods|secrets)$")
_TIMESTAMP = "2026-01-01T00:00:00Z"
# (event, namespace, job): event is "ADDED" or "DELETED"; called outside the lock.
JobListener = Callable[[str, str, dict[str, Any]], None]


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, str]
    body: dict[str, Any] | None = None


@dataclass
class _State:
    jobs: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    # (resourceVersion, namespace, event type, object snapshot)
    events: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    version: int = 100
    failures: list[tuple[Callable[[Recorded], bool], int, str]] = field(default_factory=list)
    requests: list[Recorded] = field(default_factory=list)
    closing: bool = False
    pods: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    secrets: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


class KubeApiServer:
    """The API double; use as a context manager, or call :meth:`start` and :meth:`stop`."""

    def __init__(self) -> None:
        self.state = _State()
        self.changed = threading.Condition()
        self.job_listeners: list[JobListener] = []
        handler = type("KubeApiHandler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> KubeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        with self.changed:
            self.state.closing = True
            self.changed.notify_all()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- test hooks -------------------------------------------------------------------------

    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            found = self.state.jobs.get((namespace, name))
            return copy.deepcopy(found) if found else None

    def requests(self, method: str | None = None) -> list[Recorded]:
        with self.changed:
            return [r for r in self.state.requests if method is None or r.method == method]

    def fail_next(
        self,
        status: int,
        *,
        method: str | None = None,
        times: int = 1,
        when: Callable[[Recorded], bool] | None = None,
        message: str = "injected failure",
    ) -> None:
        """The next ``times`` requests (of ``method``, and matching ``when``) answer ``status``
        with ``message`` in the ``Status`` body."""

        def matches(request: Recorded) -> bool:
            return (method is None or request.method == method) and (when is None or when(request))

        with self.changed:
            self.state.failures.extend([(matches, status, message)] * times)

    def set_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Replace the Job's status, as the Job controller would (a MODIFIED event); a Job
        that is gone already is left alone."""
        with self.changed:
            job = self.state.jobs.get((namespace, name))
            if job is None:
                return
            job["status"] = copy.deepcopy(status)
            self._record(namespace, "MODIFIED", job)

    def put_secret(self, namespace: str, secret: dict[str, Any]) -> None:
        with self.changed:
            self.state.secrets[(namespace, secret["metadata"]["name"])] = copy.deepcopy(secret)

    def secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.changed:
            found = self.state.secrets.get((namespace, name))
            return copy.deepcopy(found) if found else None

    def put_pod(self, namespace: str, pod: dict[str, Any] | None, name: str) -> None:
        """Store (or, with ``None``, remove) a pod as the kubelet reports it."""
        with self.changed:
            if pod is None:
                self.state.pods.pop((namespace, name), None)
            else:
                self.state.pods[(namespace, name)] = copy.deepcopy(pod)
            self.changed.notify_all()

    def _tell(self, event: str, namespace: str, job: dict[str, Any]) -> None:
        for listener in list(self.job_listeners):
            listener(event, namespace, copy.deepcopy(job))

    def mark_running(self, namespace: str, name: str) -> None:
        self.set_status(
            namespace, name, {"active": 1, "ready": 1, "startTime": _TIMESTAMP}
        )

    def mark_succeeded(self, namespace: str, name: str) -> None:
        conditions = [_condition("SuccessCriteriaMet", "CompletionsReached"),
                      _condition("Complete", "CompletionsReached")]
        self.set_status(namespace, name, {
            "succeeded": 1, "ready": 0, "startTime": _TIMESTAMP,
            "completionTime": _TIMESTAMP, "conditions": conditions,
        })

    def mark_failed(self, namespace: str, name: str) -> None:
        conditions = [_condition("FailureTarget", "BackoffLimitExceeded"),
                      _condition("Failed", "BackoffLimitExceeded")]
        self.set_status(namespace, name, {
            "failed": 1, "ready": 0, "startTime": _TIMESTAMP, "conditions": conditions,
        })

    # -- store (callers hold ``self.changed``) -----------------------------------------------

    def _record(self, namespace: str, kind: str, job: dict[str, Any]) -> None:
        self.state.version += 1
        job["metadata"]["resourceVersion"] = str(self.state.version)
        self.state.events.append((self.state.version, namespace, kind, copy.deepcopy(job)))
        self.changed.notify_all()

    def _take_failure(self, request: Recorded) -> tuple[int, str] | None:
        for index, (matches, status, message) in enumerate(self.state.failures):
            if matches(request):
                del self.state.failures[index]
                return status, message
        return None


def _condition(kind: str, reason: str) -> dict[str, str]:
    return {"type": kind, "status": "True", "reason": reason, "message": reason,
            "lastProbeTime": _TIMESTAMP, "lastTransitionTime": _TIMESTAMP}


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def _matches(job: dict[str, Any], selector: str) -> bool:
    labels = job.get("metadata", {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value:
            return False
    return True


class _Handler(BaseHTTPRequestHandler):
    api: KubeApiServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: tests read :meth:`KubeApiServer.requests` instead."""

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        api = self.api
        request = Recorded(method, parts.path, query, body)
        with api.changed:
            api.state.requests.append(request)
            failure = api._take_failure(request)
        route = _JOBS.match(parts.path)
        core = _CORE.match(parts.path)
        if failure is not None:
            code, message = failure
            reason = {410: "Expired", 403: "Forbidden"}.get(code, "InternalError")
            self._send(code, _status(code, reason, message))
        elif core is not None:
            self._core(method, core["ns"], core["kind"], query, body)
        elif route is None:
            self._send(404, _status(404, "NotFound", f"no route {parts.path}"))
        elif route["name"] is None and method == "POST":
            self._create(route["ns"], body or {})
        elif route["name"] is None and method == "GET" and query.get("watch") == "true":
            self._watch(route["ns"], query)
        elif route["name"] is None and method == "GET":
            self._list(route["ns"], query.get("labelSelector", ""))
        elif route["name"] is not None and method in ("GET", "DELETE"):
            self._one(method, route["ns"], route["name"])
        else:
            self._send(405, _status(405, "MethodNotAllowed", f"{method} {parts.path}"))

    def _create(self, namespace: str, job: dict[str, Any]) -> None:
        name = job.get("metadata", {}).get("name")
        if not name:
            self._send(422, _status(422, "Invalid", "metadata.name: Required value"))
            return
        with self.api.changed:
            if (namespace, name) in self.api.state.jobs:
                message = f'jobs.batch "{name}" already exists'
                self._send(409, _status(409, "AlreadyExists", message))
                return
            job = copy.deepcopy(job)
            job["metadata"].update(
                namespace=namespace, uid=str(uuid.uuid4()), creationTimestamp=_TIMESTAMP
            )
            job["status"] = {}
            self.api.state.jobs[(namespace, name)] = job
            self.api._record(namespace, "ADDED", job)
            answer = copy.deepcopy(job)
        self._send(201, answer)
        self.api._tell("ADDED", namespace, answer)

    def _core(self, method: str, namespace: str, kind: str, query: dict[str, str],
              body: dict[str, Any] | None) -> None:
        api = self.api
        if kind == "secrets" and method == "POST" and body:
            api.put_secret(namespace, body)
            self._send(201, body)
        elif kind == "pods" and method == "GET" and query.get("watch") != "true":
            selector = query.get("labelSelector", "")
            with api.changed:
                items = [copy.deepcopy(pod) for (ns, _), pod in api.state.pods.items()
                         if ns == namespace and _matches(pod, selector)]
                version = str(api.state.version)
            self._send(200, {"apiVersion": "v1", "kind": "PodList",
                             "metadata": {"resourceVersion": version}, "items": items})
        else:
            self._send(405, _status(405, "MethodNotAllowed", f"{method} {kind}"))

    def _one(self, method: str, namespace: str, name: str) -> None:
        with self.api.changed:
            job = self.api.state.jobs.get((namespace, name))
            if job is None:
                self._send(404, _status(404, "NotFound", f'jobs.batch "{name}" not found'))
                return
            answer: dict[str, Any] = copy.deepcopy(job)
            deleted = method == "DELETE"
            if deleted:
                del self.api.state.jobs[(namespace, name)]
                self.api._record(namespace, "DELETED", job)
                details = {"name": name, "group": "batch", "kind": "jobs",
                           "uid": job["metadata"]["uid"]}
                answer = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                          "status": "Success", "details": details}
        if deleted:  # the garbage collector's part: the pod goes (before the answer: foreground)
            self.api._tell("DELETED", namespace, job)
        self._send(200, answer)

    def _list(self, namespace: str, selector: str) -> None:
        with self.api.changed:
            items = [copy.deepcopy(job) for (ns, _), job in self.api.state.jobs.items()
                     if ns == namespace and _matches(job, selector)]
            version = str(self.api.state.version)
        self._send(200, {"apiVersion": "batch/v1", "kind": "JobList",
                         "metadata": {"resourceVersion": version}, "items": items})

    def _watch(self, namespace: str, query: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in self._events(namespace, query):
                data = json.dumps(event).encode() + b"\n"
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client stopped watching: not an error

    def _events(self, namespace: str, query: dict[str, str]) -> Iterator[dict[str, Any]]:
        selector = query.get("labelSelector", "")
        deadline = time.monotonic() + float(query.get("timeoutSeconds") or 300)
        api = self.api
        with api.changed:
            since = int(query.get("resourceVersion") or 0)
            if since == 0:  # no version: the current objects first, as synthetic ADDED events
                initial = [{"type": "ADDED", "object": copy.deepcopy(job)}
                           for (ns, _), job in api.state.jobs.items()
                           if ns == namespace and _matches(job, selector)]
                since = api.state.version
            else:
                initial = []
        yield from initial
        while True:
            with api.changed:
                fresh = [(v, kind, obj) for v, ns, kind, obj in api.state.events
                         if v > since and ns == namespace and _matches(obj, selector)]
                if not fresh:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0 or api.state.closing:
                        return
                    api.changed.wait(remaining)
                    continue
            for version, kind, obj in fresh:
                since = version
                yield {"type": kind, "object": obj}

    def _send(self, code: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
