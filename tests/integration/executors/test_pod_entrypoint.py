"""The Job's container run for real as a process, the way the kubelet would start it.

No container runtime runs here, so the test plays the kubelet for the parts that matter: the
command of the Job's only container (``studio`` being the venv's console script, which the image
installs the same way), the container's environment with every ``secretKeyRef`` resolved from a
Secret held as a dict (optional keys that are absent are left out, a required one that is absent
stops the start), and each ``emptyDir`` mount given a fresh directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from services.executors.pod_manifest import JobSettings, build_job, job_to_dict

EXECUTION_ID = "5b7f1c2d-aaaa-4bbb-8ccc-ddddeeeeffff"
STUDIO = Path(sys.executable).with_name("studio")
SECRET_NAME = "studio-executor-secrets"
PROCESS_TIMEOUT_S = 120


class CreateContainerConfigError(Exception):
    """What the kubelet reports when a required secret key is missing."""


def secret_store(tmp_path: Path) -> dict[str, str]:
    return {
        "STUDIO_DATABASE_URL": f"sqlite:///{tmp_path / 'studio.db'}",
        "STUDIO_SECRET_KEY": "test-secret-key-0123456789abcdef",
        "STUDIO_GITHUB_TOKEN": "ghp_testtoken0123456789",
        "OPENAI_API_KEY": "sk-test-0123456789",
        # no GEMINI_API_KEY, no ANTHROPIC_API_KEY: optional, so left out
    }


def container_start(
    job: dict[str, Any], secrets: dict[str, str], volumes: Path
) -> tuple[list[str], dict[str, str], Path]:
    """The argv, environment and working directory the kubelet would give the container."""
    (container,) = job["spec"]["template"]["spec"]["containers"]
    mounts = {}
    for mount in container["volumeMounts"]:
        directory = volumes / mount["name"]
        directory.mkdir(parents=True)
        mounts[mount["mountPath"]] = str(directory)
    env = {"PATH": os.environ["PATH"]}  # the image's own ENV; the pod's env comes on top
    for var in container["env"]:
        if "value" in var:
            env[var["name"]] = mounts.get(var["value"], var["value"])
            continue
        ref = var["valueFrom"]["secretKeyRef"]
        assert ref["name"] == SECRET_NAME
        if ref["key"] in secrets:
            env[var["name"]] = secrets[ref["key"]]
        elif not ref.get("optional", False):
            raise CreateContainerConfigError(f"couldn't find key {ref['key']} in Secret")
    command = list(container["command"])
    assert command[0] == "studio"
    return [str(STUDIO), *command[1:]], env, Path(mounts[container["workingDir"]])


@pytest.fixture
def job() -> dict[str, Any]:
    return job_to_dict(
        build_job(EXECUTION_ID, image="studio:test", namespace="ns", settings=JobSettings())
    )


def test_the_container_environment_is_built_from_the_secret(
    job: dict[str, Any], tmp_path: Path
) -> None:
    secrets = secret_store(tmp_path)
    argv, env, cwd = container_start(job, secrets, tmp_path / "volumes")
    assert argv == [str(STUDIO), "execute", EXECUTION_ID]
    assert env["STUDIO_DATABASE_URL"] == secrets["STUDIO_DATABASE_URL"]
    assert env["OPENAI_API_KEY"] == secrets["OPENAI_API_KEY"]
    assert "GEMINI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env
    assert env["STUDIO_WORKSPACE_DIR"] == str(cwd) == str(tmp_path / "volumes" / "workspace")
    assert env["STUDIO_SANDBOX"] == "required"
    del secrets["STUDIO_GITHUB_TOKEN"]
    with pytest.raises(CreateContainerConfigError):
        container_start(job, secrets, tmp_path / "again")


def test_the_entrypoint_runs_as_a_process(job: dict[str, Any], tmp_path: Path) -> None:
    argv, env, cwd = container_start(job, secret_store(tmp_path), tmp_path / "volumes")
    assert STUDIO.is_file()
    help_run = subprocess.run(
        [argv[0], "--help"], env=env, cwd=cwd, capture_output=True, text=True,
        timeout=PROCESS_TIMEOUT_S, check=False,
    )
    assert help_run.returncode == 0, help_run.stderr
    assert "Usage: studio" in help_run.stdout


def test_the_job_command_runs_studio_execute(job: dict[str, Any], tmp_path: Path) -> None:
    """The Job's own argv and environment reach ``studio execute``, which answers for the id.

    The database (a fresh SQLite file from the Secret) holds no such execution: the documented
    answer is exit code 2 and ``no execution <id>`` on stderr.
    """
    argv, env, cwd = container_start(job, secret_store(tmp_path), tmp_path / "volumes")
    run = subprocess.run(
        argv, env=env, cwd=cwd, capture_output=True, text=True,
        timeout=PROCESS_TIMEOUT_S, check=False,
    )
    assert run.returncode == 2, run.stderr
    assert f"no execution {EXECUTION_ID}" in run.stderr
    assert "No such command" not in run.stderr
