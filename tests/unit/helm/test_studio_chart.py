"""The Helm chart ``helm/studio``: it lints, renders valid objects for the supported Kubernetes
versions, refuses bad values with the schema's message, holds no secret, runs every pod under the
``restricted`` Pod Security Standard, and agrees with the Job the worker builds."""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import helm_python
import kubernetes_validate
import pytest

from services.execution.providers.cloud_auth import ALL_NAMES
from services.executors.pod_manifest import build_job, job_labels, job_to_dict
from services.executors.selection import job_settings
from services.settings import PROVIDER_SECRET_VARIABLES, TELEMETRY_VARIABLES, StudioSettings
from tests.unit.helm.chart import (
    CHART,
    NAMESPACE,
    PRODUCTION_VALUES,
    load_values,
    notes,
    one,
    pod_specs,
    render,
    role_grants,
    schema_refusal,
)

KUBERNETES_VERSIONS = ("1.31.0", "1.33.0")
PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
VALUE_SETS = {"default": None, "production": load_values(PRODUCTION_VALUES)}
# Variables a pod may carry that are not STUDIO_* settings (read by the SDKs themselves).
CREDENTIAL_HINTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "DATABASE_URL", "BROKER_URL")


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(copy.deepcopy(VALUE_SETS[request.param]))


def test_strict_lint_is_clean() -> None:
    report = helm_python.lint(CHART, strict=True, namespace=NAMESPACE)
    assert report["errors"] == [] and report["messages"] == []
    production = helm_python.lint(CHART, load_values(PRODUCTION_VALUES), strict=True)
    assert production["errors"] == [] and production["messages"] == []


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_validates_strictly(rendered: list[dict[str, Any]], version: str) -> None:
    kinds = {obj["kind"] for obj in rendered}
    assert {"Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ConfigMap",
            "NetworkPolicy", "Job"} <= kinds
    for obj in rendered:
        kubernetes_validate.validate(obj, version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_executor_job_validates_strictly(version: str) -> None:
    settings = StudioSettings(executor="kubernetes", kube_image="studio:1",
                              kube_tolerations=[{"key": "k", "operator": "Exists"}],
                              kube_node_selector={"pool": "executors"})
    job = build_job("0123456789abcdef", image="studio:1", namespace=NAMESPACE,
                    settings=job_settings(settings))
    kubernetes_validate.validate(job_to_dict(job), version, strict=True)


def test_production_values_switch_on_the_ingress_and_workload_identity() -> None:
    objects = render(load_values(PRODUCTION_VALUES))
    ingress = one(objects, "Ingress")
    assert ingress["spec"]["tls"][0]["secretName"] == "studio-tls"
    accounts = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceAccount"}
    worker = accounts["studio-worker"]["metadata"]["annotations"]
    assert worker == {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/studio-worker"}
    executor = accounts["studio-executor"]["metadata"]["annotations"]
    assert "iam.gke.io/gcp-service-account" in executor
    assert not [o for o in render() if o["kind"] == "Ingress"]  # off by default


@pytest.mark.parametrize(("change", "message"), [
    ({"worker": {"concurrency": -1}}, "/worker/concurrency"),
    ({"worker": {"concurrency": "four"}}, "/worker/concurrency"),
    ({"executor": {"kind": "docker"}}, "/executor/kind"),
    ({"api": {"resources": {"limits": {"cpu": "lots"}}}}, "/api/resources/limits/cpu"),
    ({"secrets": {"databasePassword": "hunter2"}}, "databasePassword"),
    ({"executor": {"activeDeadlineSeconds": 5}}, "/executor/activeDeadlineSeconds"),
    ({"serviceAccounts": {"executor": {"name": "Not A Name"}}}, "/serviceAccounts/executor/name"),
    ({"providers": {"claudeAuth": "iam-magic"}}, "/providers/claudeAuth"),
    ({"providers": {"env": {"AWS_SECRET_ACCESS_KEY": "s3cr3t"}}},
     "invalid propertyName 'AWS_SECRET_ACCESS_KEY'"),
    ({"providers": {"env": {"AWS_REGION": "eu-west-1\nX: y"}}}, "/providers/env/AWS_REGION"),
    ({"providers": {"awsRoleArn": "arn:aws:iam::1:role/x"}}, "/providers/awsRoleArn"),
])
def test_bad_values_are_refused_with_the_schemas_message(change: dict[str, Any],
                                                        message: str) -> None:
    assert message in schema_refusal(change)


def test_no_manifest_carries_a_secret_value(rendered: list[dict[str, Any]]) -> None:
    assert not [o for o in rendered if o["kind"] == "Secret"]
    config = one(rendered, "ConfigMap", "studio")["data"]
    secret_settings = {f"STUDIO_{name.upper()}" for name, field in
                       StudioSettings.model_fields.items() if "SecretStr" in str(field.annotation)}
    assert secret_settings >= {"STUDIO_DATABASE_URL", "STUDIO_GITHUB_TOKEN", "STUDIO_SECRET_KEY"}
    assert not set(config) & (secret_settings | set(PROVIDER_SECRET_VARIABLES))
    for where, spec in pod_specs(rendered):
        for container in spec["containers"]:
            for variable in container.get("env", []):
                credential = any(hint in variable["name"] for hint in CREDENTIAL_HINTS)
                if credential:
                    assert "value" not in variable, (where, variable["name"])
                    assert set(variable["valueFrom"]) == {"secretKeyRef"}, where


def test_secrets_are_references_to_the_existing_secrets(rendered: list[dict[str, Any]]) -> None:
    names = {ref["secretKeyRef"]["name"] for _, spec in pod_specs(rendered)
             for container in spec["containers"] for variable in container.get("env", [])
             if (ref := variable.get("valueFrom"))}
    assert names in ({"studio-secrets"}, {"studio-prod-secrets"})


def _assert_restricted(where: str, spec: dict[str, Any]) -> None:
    pod = spec.get("securityContext", {})
    assert pod.get("runAsNonRoot") is True, where
    assert pod.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
    assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC")
    for volume in spec.get("volumes", []):
        assert set(volume) - {"name"} <= {"emptyDir", "configMap", "secret", "projected"}, where
    for container in spec["containers"] + spec.get("initContainers", []):
        context = container.get("securityContext", {})
        assert context.get("allowPrivilegeEscalation") is False, where
        assert context.get("readOnlyRootFilesystem") is True, where
        assert context.get("capabilities", {}).get("drop") == ["ALL"], where
        assert not context.get("capabilities", {}).get("add"), where
        assert context.get("privileged") in (None, False), where
        assert context.get("runAsUser", 1) != 0, where


def test_every_pod_is_restricted(rendered: list[dict[str, Any]]) -> None:
    specs = list(pod_specs(rendered))
    assert len(specs) >= 4  # api, worker, reaper, migrations
    for where, spec in specs:
        _assert_restricted(where, spec)
    job = build_job("0123456789abcdef", image="studio:1", namespace=NAMESPACE,
                    settings=job_settings(StudioSettings()))
    _assert_restricted("executor Job", job_to_dict(job)["spec"]["template"]["spec"])


def test_every_variable_the_chart_sets_is_a_setting(rendered: list[dict[str, Any]]) -> None:
    read = {f"STUDIO_{name.upper()}" for name in StudioSettings.model_fields}
    read |= set(PROVIDER_SECRET_VARIABLES) | set(TELEMETRY_VARIABLES)  # read by OpenTelemetry
    read |= ALL_NAMES  # the auth modes' own variables, read by the provider SDKs
    config = set(one(rendered, "ConfigMap", "studio")["data"])
    assert config - read == set()
    for where, spec in pod_specs(rendered):
        for container in spec["containers"]:
            names = {variable["name"] for variable in container.get("env", [])}
            assert names - read == set(), where
    # and the ConfigMap parses: the worker starts with it
    StudioSettings(**{key.removeprefix("STUDIO_").lower(): value
                      for key, value in one(rendered, "ConfigMap", "studio")["data"].items()
                      if key.startswith("STUDIO_")})


def test_the_worker_builds_the_job_the_chart_expects(rendered: list[dict[str, Any]]) -> None:
    """The ConfigMap's settings give the worker the image, service account and Secret names of
    the chart; the Job the worker builds from them matches the chart's other objects."""
    data = one(rendered, "ConfigMap", "studio")["data"]
    settings = StudioSettings(**{
        key.removeprefix("STUDIO_").lower(): value for key, value in data.items()})
    job = job_to_dict(build_job("0123456789abcdef", image=settings.kube_image or "",
                                  namespace=settings.kube_namespace or "",
                                  settings=job_settings(settings)))
    spec = job["spec"]["template"]["spec"]
    accounts = {o["metadata"]["name"]: o for o in rendered if o["kind"] == "ServiceAccount"}
    executor_account = accounts[spec["serviceAccountName"]]
    assert executor_account.get("automountServiceAccountToken") is False
    assert spec["automountServiceAccountToken"] is False
    bound = {subject["name"] for o in rendered if o["kind"] == "RoleBinding"
             for subject in o["subjects"]}
    assert spec["serviceAccountName"] not in bound  # no API access at all
    assert job["metadata"]["namespace"] == NAMESPACE
    container = spec["containers"][0]
    workers = one(rendered, "Deployment", "-worker")["spec"]["template"]["spec"]
    assert container["image"].rsplit(":", 1)[0] in (
        "ghcr.io/example/studio", "registry.example.com/platform/studio-executor")
    assert container["imagePullPolicy"] == workers["containers"][0]["imagePullPolicy"]
    assert spec.get("imagePullSecrets", []) == workers.get("imagePullSecrets", [])
    secrets = {v["valueFrom"]["secretKeyRef"]["name"] for v in container["env"] if "valueFrom" in v}
    # the executor Secret, and the Job's own login Secret (executor.executionLogins)
    assert secrets == {data["STUDIO_KUBE_SECRET_NAME"], "studio-exec-0123456789ab-login"}
    # the NetworkPolicy selects the executor pods
    executor_policy = one(rendered, "NetworkPolicy", "-executor")
    policy = executor_policy["spec"]["podSelector"]["matchLabels"]
    labels = job_labels("0123456789abcdef")
    assert policy.items() <= labels.items()
    assert executor_policy["spec"]["ingress"] == []


def test_production_executor_settings_reach_the_job() -> None:
    values = load_values(PRODUCTION_VALUES)
    data = one(render(values), "ConfigMap", "studio")["data"]
    settings = StudioSettings(**{key.removeprefix("STUDIO_").lower(): value
                                 for key, value in data.items()})
    spec = job_to_dict(build_job("0123456789abcdef", image=settings.kube_image or "",
                                   namespace=NAMESPACE, settings=job_settings(
                                       settings, environment={**data, "TRACEPARENT": PARENT})))
    pod = spec["spec"]["template"]["spec"]
    env = {v["name"]: v.get("value") for v in pod["containers"][0]["env"]}
    # the worker hands its pod the collector and the trace context of the task it runs
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == values["observability"]["otlpEndpoint"]
    assert env["TRACEPARENT"] == PARENT
    executor = values["executor"]
    image = "registry.example.com/platform/studio-executor:2026.11.1"
    assert pod["containers"][0]["image"] == image
    assert pod["nodeSelector"] == executor["nodeSelector"]
    assert pod["tolerations"] == executor["tolerations"]
    assert pod["containers"][0]["resources"]["limits"]["memory"] == "8Gi"
    assert spec["spec"]["activeDeadlineSeconds"] == 7200
    assert pod["imagePullSecrets"] == [{"name": "registry-credentials"}]


def test_the_role_is_namespaced_and_narrow(rendered: list[dict[str, Any]]) -> None:
    assert not [o for o in rendered if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert role_grants(rendered) == {
        ("batch", "jobs", verb) for verb in ("create", "delete", "get", "list", "watch")
    } | {("", "pods", "list"), ("", "secrets", "create")}  # the Jobs' login Secrets
    binding = one(rendered, "RoleBinding")
    assert [s["name"] for s in binding["subjects"]] == ["studio-worker"]


def test_the_migrations_run_as_a_pre_install_and_pre_upgrade_hook() -> None:
    job = one(render(), "Job")
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["db", "upgrade"]


def test_probes_and_commands() -> None:
    objects = render()
    api = one(objects, "Deployment", "-api")["spec"]["template"]["spec"]["containers"][0]
    assert api["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert api["readinessProbe"]["httpGet"]["path"] == "/readyz"
    worker = one(objects, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"] == ["worker", "--concurrency", "2", "--no-reaper", "--metrics-port",
                              "9090"]
    reaper = one(objects, "Deployment", "-reaper")["spec"]["template"]["spec"]["containers"][0]
    assert reaper["args"] == ["reaper", "--metrics-port", "9090"]


def test_the_docs_values_table_is_the_schemas() -> None:
    script = CHART.parents[1] / "scripts" / "helm_values_table.py"
    spec = importlib.util.spec_from_file_location("helm_values_table", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.PAGE.read_text()
    assert module.page_with_table(page) == page
    for key in ("worker.concurrency", "executor.existingSecret",
                "serviceAccounts.worker.annotations"):
        assert f"``{key}``" in page


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_the_local_executor_needs_no_kubernetes_access(version: str) -> None:
    objects = render({"executor": {"kind": "local"}})
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]
    worker = one(objects, "Deployment", "-worker")["spec"]["template"]["spec"]
    assert worker["automountServiceAccountToken"] is False
    mounts = {m["mountPath"] for m in worker["containers"][0]["volumeMounts"]}
    assert "/workspace" in mounts  # studio execute runs in the worker pod
    assert one(objects, "ConfigMap", "studio")["data"]["STUDIO_EXECUTOR"] == "local"


def test_the_notes_name_the_secrets_and_the_way_in() -> None:
    default = notes(None)
    assert "studio-secrets" in default and "studio-executor-secrets" in default
    assert "port-forward svc/studio-api" in default
    production = notes(load_values(PRODUCTION_VALUES))
    assert "https://studio.example.com/" in production
    assert "studio-prod-executor-secrets" in production


def test_the_provider_auth_values_reach_the_worker_and_its_job() -> None:
    """Web identity for claude, Vertex AI for gemini: the ConfigMap carries the modes and their
    plain values; the Job the worker builds from them projects the token and mounts the Google
    credentials from the executor Secret, and holds no credential value."""
    role = "arn:aws:iam::123456789012:role/studio-executor"
    values = {"providers": {
        "claudeAuth": "bedrock_web_identity", "geminiAuth": "vertex", "awsRoleArn": role,
        "env": {"AWS_REGION": "eu-west-1", "GOOGLE_CLOUD_PROJECT": "studio-prod",
                "GOOGLE_CLOUD_LOCATION": "europe-west4"}}}
    data = one(render(values), "ConfigMap", "studio")["data"]
    assert data["STUDIO_CLAUDE_AUTH"] == "bedrock_web_identity"
    assert data["AWS_REGION"] == "eu-west-1"
    settings = StudioSettings(**{key.removeprefix("STUDIO_").lower(): value
                                 for key, value in data.items() if key.startswith("STUDIO_")})
    job = job_to_dict(build_job("0123456789abcdef", image=settings.kube_image or "",
                                namespace=NAMESPACE,
                                settings=job_settings(settings, environment=data)))
    pod = job["spec"]["template"]["spec"]
    env = {v["name"]: v.get("value", v.get("valueFrom")) for v in pod["containers"][0]["env"]}
    assert env["AWS_ROLE_ARN"] == role and env["STUDIO_CLAUDE_AUTH"] == "bedrock_web_identity"
    assert env["GOOGLE_CLOUD_PROJECT"] == "studio-prod"
    projected = [v for v in pod["volumes"] if "projected" in v]
    assert projected[0]["projected"]["sources"][0]["serviceAccountToken"]["audience"] == (
        "sts.amazonaws.com")
    [secret_volume] = [v for v in pod["volumes"] if "secret" in v]
    assert secret_volume["secret"]["secretName"] == data["STUDIO_KUBE_SECRET_NAME"]
    for kubernetes_version in KUBERNETES_VERSIONS:
        assert kubernetes_validate.validate(job, kubernetes_version, strict=True)
