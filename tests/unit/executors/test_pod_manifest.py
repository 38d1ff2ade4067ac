"""The executor Job: valid against the Kubernetes OpenAPI schemas, and locked down as documented."""

from __future__ import annotations

import json
import re
from typing import Any

import kubernetes_validate
import pytest
from kubernetes import client

from services.executors.pod_manifest import (
    DEFAULT_SECRET_ENV,
    EXECUTION_ID_LABEL,
    JobSettings,
    SecretEnv,
    build_job,
    job_name,
    job_to_dict,
)

EXECUTION_ID = "0f3c2a1e-1111-4222-8333-444455556666"
IMAGE = "registry.example.com/studio/executor:1.0.0"
NAMESPACE = "studio-exec"
# Two Kubernetes minor versions whose schemas kubernetes-validate ships (it has 1.25 to 1.37).
KUBERNETES_VERSIONS = ("1.31", "1.33")
PROVIDER_KEYS = {"OPENAI_API_KEY", "GEMINI_API_KEY", "ANTHROPIC_API_KEY"}
REQUIRED_SECRETS = {"STUDIO_DATABASE_URL", "STUDIO_GITHUB_TOKEN", "STUDIO_SECRET_KEY"}
# What a leaked credential looks like in a literal value.
SECRET_VALUE_SHAPES = [
    re.compile(r"sk-[A-Za-z0-9_-]{8,}"),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{8,}"),
    re.compile(r"AIza[0-9A-Za-z_-]{8,}"),
    re.compile(r"://[^/\s:@]+:[^/\s@]+@"),  # credentials inside a URL
]
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|DATABASE_URL", re.IGNORECASE)

SETTINGS_VARIANTS = {
    "defaults": JobSettings(),
    "user-namespaced": JobSettings(
        host_users=False,
        sandbox_mode="bwrap",
        image_pull_secrets=("registry-credentials",),
        priority_class_name="studio-executors",
        extra_env={"STUDIO_GITHUB_API_URL": "https://github.example.com/api/v3"},
        secret_name="custom-secret",
        service_account_name="custom-executor",
    ),
}


def manifest(settings: JobSettings | None = None) -> dict[str, Any]:
    settings = settings or JobSettings()
    job = build_job(EXECUTION_ID, image=IMAGE, namespace=NAMESPACE, settings=settings)
    return job_to_dict(job)


def pod(data: dict[str, Any]) -> dict[str, Any]:
    return data["spec"]["template"]["spec"]


def container(data: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod(data)["containers"]
    return only


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("variant", sorted(SETTINGS_VARIANTS))
def test_job_validates_strictly_against_the_kubernetes_schema(version: str, variant: str) -> None:
    data = manifest(SETTINGS_VARIANTS[variant])
    used = kubernetes_validate.validate(data, version, strict=True)
    assert used == version  # that version's own schema, not a fallback to an older one


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_strict_validation_catches_unknown_keys_and_wrong_types(version: str) -> None:
    """The check above can fail: strict schemas reject what a typo or a wrong type produces."""
    unknown = manifest()
    container(unknown)["readOnlyRootFileSystem"] = True  # note the capital S
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(unknown, version, strict=True)
    wrong_type = manifest()
    wrong_type["spec"]["backoffLimit"] = "0"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(wrong_type, version, strict=True)


def test_job_identity_and_run_once_policy() -> None:
    data = manifest()
    assert data["apiVersion"] == "batch/v1" and data["kind"] == "Job"
    assert data["metadata"]["name"] == "studio-exec-0f3c2a1e1111"
    assert data["metadata"]["namespace"] == NAMESPACE
    for labels in (data["metadata"]["labels"], data["spec"]["template"]["metadata"]["labels"]):
        assert labels["app.kubernetes.io/name"] == "studio-executor"
        assert labels[EXECUTION_ID_LABEL] == EXECUTION_ID
    assert data["spec"]["backoffLimit"] == 0
    assert data["spec"]["activeDeadlineSeconds"] == JobSettings().active_deadline_seconds > 0
    assert data["spec"]["ttlSecondsAfterFinished"] == JobSettings().ttl_seconds_after_finished
    assert pod(data)["restartPolicy"] == "Never"
    assert container(data)["command"] == ["studio", "execute", EXECUTION_ID]
    assert container(data)["image"] == IMAGE


def test_pod_runs_non_root_without_service_account_token() -> None:
    spec = pod(manifest(JobSettings(service_account_name="studio-runner")))
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "studio-runner"
    assert spec["enableServiceLinks"] is False
    security = spec["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == 10001
    assert security["fsGroup"] == 10001
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "hostUsers" not in spec  # left to the cluster unless asked for


def test_container_is_read_only_and_unprivileged() -> None:
    security = container(manifest())["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["privileged"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}


def test_writable_places_are_size_limited_empty_dirs() -> None:
    data = manifest(JobSettings(workspace_size_limit="3Gi", tmp_size_limit="300Mi"))
    volumes = {volume["name"]: volume for volume in pod(data)["volumes"]}
    mounts = {mount["mountPath"]: mount for mount in container(data)["volumeMounts"]}
    assert set(mounts) == {"/workspace", "/tmp", "/home/studio"}
    for path, mount in mounts.items():
        assert set(volumes[mount["name"]]) == {"name", "emptyDir"}, path  # no hostPath, no PVC
        assert volumes[mount["name"]]["emptyDir"]["sizeLimit"], path
        assert not mount.get("readOnly"), path
    assert volumes[mounts["/workspace"]["name"]]["emptyDir"]["sizeLimit"] == "3Gi"
    assert volumes[mounts["/tmp"]["name"]]["emptyDir"]["sizeLimit"] == "300Mi"
    assert container(data)["workingDir"] == "/workspace"


def test_resources_have_requests_and_limits() -> None:
    resources = container(manifest())["resources"]
    for kind in ("requests", "limits"):
        assert set(resources[kind]) == {"cpu", "memory", "ephemeral-storage"}, kind


def test_plain_environment_names_the_workspace_and_the_sandbox() -> None:
    data = manifest(JobSettings(sandbox_mode="landlock"))
    env = {var["name"]: var for var in container(data)["env"]}
    assert env["STUDIO_WORKSPACE_DIR"] == {"name": "STUDIO_WORKSPACE_DIR", "value": "/workspace"}
    assert env["STUDIO_SANDBOX"]["value"] == "landlock"
    assert JobSettings().sandbox_mode == "required"  # the production default


@pytest.mark.parametrize("variant", sorted(SETTINGS_VARIANTS))
def test_every_secret_comes_from_a_secret_key_ref(variant: str) -> None:
    settings = SETTINGS_VARIANTS[variant]
    env = container(manifest(settings))["env"]
    by_name = {var["name"]: var for var in env}
    assert len(by_name) == len(env)  # no duplicate names
    assert set(by_name) >= REQUIRED_SECRETS | PROVIDER_KEYS
    for name in REQUIRED_SECRETS | PROVIDER_KEYS:
        var = by_name[name]
        assert "value" not in var, name
        ref = var["valueFrom"]["secretKeyRef"]
        assert ref["name"] == settings.secret_name
        assert ref["key"] == name
        assert ref.get("optional", False) is (name in PROVIDER_KEYS), name


@pytest.mark.parametrize("variant", sorted(SETTINGS_VARIANTS))
def test_no_literal_value_looks_secret(variant: str) -> None:
    data = manifest(SETTINGS_VARIANTS[variant])
    for var in container(data)["env"]:
        if "value" in var:
            assert not SECRET_NAME.search(var["name"]), var
            assert not any(shape.search(var["value"]) for shape in SECRET_VALUE_SHAPES), var
        else:
            assert set(var["valueFrom"]) == {"secretKeyRef"}, var
    text = json.dumps(data)
    assert not any(shape.search(text) for shape in SECRET_VALUE_SHAPES)


def test_secret_value_shapes_recognise_credentials() -> None:
    """The check above can fail: each shape matches the kind of value it is there for."""
    samples = ["sk-proj-abcdefgh1234", "ghp_abcdefgh12345678", "AIzaSyA-abcdefgh12",
               "postgresql://studio:hunter2@db:5432/studio"]
    for shape, sample in zip(SECRET_VALUE_SHAPES, samples, strict=True):
        assert shape.search(sample), sample


@pytest.mark.parametrize(
    "name", ["OPENAI_API_KEY", "STUDIO_DATABASE_URL", "MY_SERVICE_TOKEN", "DB_PASSWORD"]
)
def test_a_credential_as_literal_extra_env_is_refused(name: str) -> None:
    with pytest.raises(ValueError, match="Secret"):
        manifest(JobSettings(extra_env={name: "literal"}))


def test_secret_env_is_configurable() -> None:
    settings = JobSettings(secret_env=(*DEFAULT_SECRET_ENV, SecretEnv("AWS_SECRET_ACCESS_KEY",
                                                                       optional=True, key="aws")))
    env = {var["name"]: var for var in container(manifest(settings))["env"]}
    ref = env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": settings.secret_name, "key": "aws", "optional": True}


def test_user_namespaced_pods_are_opt_in() -> None:
    assert pod(manifest(JobSettings(host_users=False)))["hostUsers"] is False


@pytest.mark.parametrize("bad", ["", "-leading", "has space", "x" * 64, "trailing-"])
def test_execution_ids_that_cannot_be_labels_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="label"):
        build_job(bad, image=IMAGE, namespace=NAMESPACE, settings=JobSettings())


@pytest.mark.parametrize("execution_id", [EXECUTION_ID, "run_7", "A" * 63, "x.y-z"])
def test_job_names_are_dns_labels(execution_id: str) -> None:
    name = job_name(execution_id)
    assert re.fullmatch(r"studio-exec-[a-z0-9]{12}", name), name
    assert len(name) <= 63


def test_job_round_trips_through_the_client_models() -> None:
    data = manifest()
    job = client.ApiClient().deserialize(json.dumps(data), "V1Job", "application/json")
    assert isinstance(job, client.V1Job)
    assert job_to_dict(job) == data
