"""Stands for the kubelet and the Job controller of one node, behind :mod:`tests.support.kube_api`.

When a Job is created in the API double, :class:`Kubelet` runs its pod's single container as a
local process, the way a node would run it, and reports back through the double (so the worker
sees it only through the API: the Job watch and the pod list):

* **Image.** Only images in ``images`` "exist": any other leaves the pod ``Pending`` with the
  container waiting in ``ErrImagePull``, as a registry miss does.
* **Command.** The container's ``command`` + ``args``; the first word is looked up in
  ``commands`` (``{"studio": [sys.executable, "-m", "services.cli"]}``), standing for the image's
  ``PATH``.
* **Environment.** Exactly what the pod spec declares: ``value`` entries, and ``valueFrom.
  secretKeyRef`` resolved from Secrets created in the double (a missing optional key is left out;
  a missing required Secret or key leaves the container waiting in
  ``CreateContainerConfigError``, retried every ``CONFIG_RETRY_INTERVAL_S`` for ``config_retry_s``
  as a kubelet's pod syncs do, so a Secret created just after its Job is picked up). On top
  only ``image_env``: what the image's ``ENV`` lines give (``PATH``, the locale). Nothing of
  the test process's own environment leaks in.
* **Volumes.** Each ``emptyDir`` is a fresh directory under ``root``. A container cannot mount
  it at its ``mountPath`` here, so paths are translated: the working directory and every
  environment value that is a mount path (or under one) are rewritten to the volume's directory.
* **Status.** Pod phase and container states are stored in the double (``Pending`` ->
  ``Running`` -> ``Succeeded``/``Failed``) and the Job's status follows (``active``/``ready``,
  then ``Complete`` or ``Failed``, with ``backoffLimit: 0``), each change a watch event.
* **Deletion.** Deleting the Job kills the container: ``SIGKILL`` of the process and everything
  under it (a container's PID namespace goes as a whole), and the pod is removed.

:meth:`Kubelet.kill` plays a node failure: the container is ``SIGKILL``ed and the pod fails
(exit code 137), the Job with it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from services.executors.local import descendants
from tests.support.kube_api import KubeApiServer

_TIMESTAMP = "2026-01-01T00:00:00Z"
CONFIG_RETRY_INTERVAL_S = 0.2


@dataclass
class _Pod:
    namespace: str
    name: str
    job: str
    labels: dict[str, str]
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    deleted: bool = False
    killed: bool = False


@dataclass
class Kubelet:
    """Runs the pods of the Jobs created in ``api``; attach with :meth:`start`."""

    api: KubeApiServer
    root: Path
    commands: Mapping[str, Sequence[str]]
    images: frozenset[str]
    image_env: Mapping[str, str] = field(default_factory=dict)
    pods: dict[str, _Pod] = field(default_factory=dict)  # by Job name
    started: list[str] = field(default_factory=list)  # pod names, in order
    # How long a container waiting for a Secret keeps being retried (a real kubelet retries at
    # every sync of the pod, for as long as the pod exists).
    config_retry_s: float = 30.0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stopped: bool = False

    def start(self) -> Kubelet:
        self.api.job_listeners.append(self._on_job)
        return self

    def stop(self) -> None:
        self._stopped = True
        if self._on_job in self.api.job_listeners:
            self.api.job_listeners.remove(self._on_job)
        with self._lock:
            pods = list(self.pods.values())
        for pod in pods:
            self._kill_tree(pod)

    def log(self, job: str) -> str:
        path = self.root / "logs" / f"{job}.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def pid(self, job: str) -> int | None:
        with self._lock:
            pod = self.pods.get(job)
        return pod.process.pid if pod and pod.process else None

    def kill(self, job: str) -> None:
        """The container dies (``SIGKILL``): the pod and the Job fail."""
        with self._lock:
            pod = self.pods[job]
            pod.killed = True
        self._kill_tree(pod)

    # -- the API's side ----------------------------------------------------------------------

    def _on_job(self, event: str, namespace: str, job: dict[str, Any]) -> None:
        name = job["metadata"]["name"]
        if event == "DELETED":
            with self._lock:
                pod = self.pods.get(name)
            if pod is not None:
                pod.deleted = True
                self._kill_tree(pod)
                self.api.put_pod(namespace, None, pod.name)
            return
        threading.Thread(target=self._run, args=(namespace, job), daemon=True).start()

    def _run(self, namespace: str, job: dict[str, Any]) -> None:
        template = job["spec"]["template"]
        spec = template["spec"]
        container = spec["containers"][0]
        job_name = job["metadata"]["name"]
        labels = {**template["metadata"].get("labels", {}),
                  "batch.kubernetes.io/job-name": job_name}
        pod = _Pod(namespace, f"{job_name}-{uuid.uuid4().hex[:5]}", job_name, labels)
        with self._lock:
            self.pods[job_name] = pod
            self.started.append(pod.name)
        self._report(pod, container, "Pending", {"waiting": {"reason": "ContainerCreating"}})
        if container["image"] not in self.images:
            self._report(pod, container, "Pending", {"waiting": {
                "reason": "ErrImagePull",
                "message": f"pull access denied for {container['image']}: not found"}})
            return
        env = self._environment(namespace, container)
        retry_until = time.monotonic() + self.config_retry_s
        while isinstance(env, str):
            self._report(pod, container, "Pending", {"waiting": {
                "reason": "CreateContainerConfigError", "message": env}})
            if pod.deleted or self._stopped or time.monotonic() > retry_until:
                return
            time.sleep(CONFIG_RETRY_INTERVAL_S)  # the pod's next sync: the Secret may exist now
            env = self._environment(namespace, container)
        mounts = self._volumes(pod, spec, container)
        env = {key: _translate(value, mounts) for key, value in env.items()}
        argv = [*container.get("command", []), *container.get("args", [])]
        argv = [*self.commands.get(argv[0], [argv[0]]), *argv[1:]]
        cwd = _translate(container.get("workingDir", "/"), mounts)
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        with self._lock:
            if pod.deleted:
                return
            pod.log = (self.root / "logs" / f"{job_name}.log").open("ab")
            pod.process = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                           stdout=pod.log, stderr=subprocess.STDOUT,
                                           start_new_session=True)
        self._report(pod, container, "Running", {"running": {"startedAt": _TIMESTAMP}})
        self.api.mark_running(namespace, job_name)
        code = pod.process.wait()
        pod.log.close()
        if pod.deleted:
            return
        exit_code = 137 if code < 0 else code
        phase = "Succeeded" if exit_code == 0 else "Failed"
        self._report(pod, container, phase, {"terminated": {
            "exitCode": exit_code, "reason": "Completed" if exit_code == 0 else "Error"}})
        if exit_code == 0:
            self.api.mark_succeeded(namespace, job_name)
        else:
            self.api.mark_failed(namespace, job_name)

    def _environment(self, namespace: str, container: dict[str, Any]) -> dict[str, str] | str:
        env = dict(self.image_env)
        for variable in container.get("env", []):
            if "value" in variable:
                env[variable["name"]] = variable["value"]
                continue
            ref = variable["valueFrom"]["secretKeyRef"]
            secret = self.api.secret(namespace, ref["name"])
            value = _secret_value(secret, ref["key"]) if secret else None
            if value is None and not ref.get("optional"):
                return f"secret {ref['name']!r} or its key {ref['key']!r} not found"
            if value is not None:
                env[variable["name"]] = value
        return env

    def _volumes(self, pod: _Pod, spec: dict[str, Any],
                 container: dict[str, Any]) -> dict[str, str]:
        """Mount path -> a fresh directory per ``emptyDir`` volume."""
        directories: dict[str, Path] = {}
        for volume in spec.get("volumes", []):
            assert set(volume) == {"name", "emptyDir"}, f"unsupported volume {volume}"
            directories[volume["name"]] = self.root / "pods" / pod.name / volume["name"]
            directories[volume["name"]].mkdir(parents=True)
        return {mount["mountPath"]: str(directories[mount["name"]])
                for mount in container.get("volumeMounts", [])}

    def _report(self, pod: _Pod, container: dict[str, Any], phase: str,
                state: dict[str, Any]) -> None:
        if pod.deleted:
            return
        status = {"name": container["name"], "image": container["image"], "imageID": "",
                  "ready": "running" in state, "restartCount": 0, "started": "running" in state,
                  "state": state}
        self.api.put_pod(pod.namespace, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod.name, "namespace": pod.namespace, "labels": pod.labels},
            "status": {"phase": phase, "containerStatuses": [status]},
        }, pod.name)

    def _kill_tree(self, pod: _Pod) -> None:
        if pod.process is None or pod.process.poll() is not None:
            return
        for pid in [*descendants(pod.process.pid), pod.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _secret_value(secret: dict[str, Any], key: str) -> str | None:
    if key in (secret.get("stringData") or {}):
        return str(secret["stringData"][key])
    encoded = (secret.get("data") or {}).get(key)
    return base64.b64decode(encoded).decode() if encoded is not None else None


def _translate(value: str, mounts: Mapping[str, str]) -> str:
    for mount, directory in sorted(mounts.items(), key=lambda item: -len(item[0])):
        if value == mount or value.startswith(mount.rstrip("/") + "/"):
            return directory + value[len(mount.rstrip("/")):]
    return value


