"""The chart's retention, approval and setup-phase values: ``retention.days``,
``approvals.timeoutSeconds``, ``setupPhase.allowlist`` and ``setupPhase.timeoutSeconds`` reach the
ConfigMap every process reads (``STUDIO_RETENTION_DAYS``, ``STUDIO_APPROVAL_TIMEOUT_S``,
``STUDIO_SETUP_ALLOWLIST``, ``STUDIO_SETUP_TIMEOUT_S``), the settings parse them back, the worker
hands the executor Job the ones its process reads, and the schema refuses hostile values before
anything renders."""

from __future__ import annotations

from typing import Any

import helm_python
import kubernetes_validate
import pytest

from services.execution.network.allowlist import AllowlistError, parse_allowlist
from services.executors.pod_manifest import build_job, job_to_dict
from services.executors.selection import job_settings
from services.settings import StudioSettings
from tests.unit.helm.chart import (
    CHART,
    NAMESPACE,
    PRODUCTION_VALUES,
    load_values,
    notes,
    one,
    pod_specs,
    render,
    schema_refusal,
)

NAMES = ("STUDIO_RETENTION_DAYS", "STUDIO_APPROVAL_TIMEOUT_S", "STUDIO_SETUP_ALLOWLIST",
         "STUDIO_SETUP_TIMEOUT_S")
VALID_ENTRIES = ["pypi.org", ".pythonhosted.org", "registry.npmjs.org:443", ".corp.example:8443",
                 "10.1.2.3:3141", "[fd00::1]:3141", "devpi.internal.:3141", "my_index.local"]


def _config(values: dict[str, Any] | None) -> dict[str, str]:
    data: dict[str, str] = one(render(values), "ConfigMap", "studio")["data"]
    return data


def _settings(data: dict[str, str]) -> StudioSettings:
    return StudioSettings(**{key.removeprefix("STUDIO_").lower(): value
                             for key, value in data.items() if key.startswith("STUDIO_")})


def _pod_env(data: dict[str, str]) -> dict[str, str]:
    settings = _settings(data)
    job = job_to_dict(build_job("0123456789abcdef", image=settings.kube_image or "",
                                namespace=NAMESPACE,
                                settings=job_settings(settings, environment=data)))
    container = job["spec"]["template"]["spec"]["containers"][0]
    return {v["name"]: v["value"] for v in container["env"] if "value" in v}


def test_the_defaults_are_the_settings_defaults() -> None:
    data = _config(None)
    assert "STUDIO_RETENTION_DAYS" not in data  # 0: no retention, kept until pruned
    settings, defaults = _settings(data), StudioSettings()
    assert settings.retention_days is None
    assert settings.approval_timeout_s == defaults.approval_timeout_s
    assert settings.setup_allowlist == defaults.setup_allowlist
    assert settings.setup_timeout_s == defaults.setup_timeout_s


def test_the_values_reach_every_process_and_the_executor_job() -> None:
    values = {"retention": {"days": 30}, "approvals": {"timeoutSeconds": 2592000},
              "setupPhase": {"allowlist": VALID_ENTRIES, "timeoutSeconds": 86400}}
    objects = render(values)
    data = one(objects, "ConfigMap", "studio")["data"]
    assert {name: data[name] for name in NAMES} == {
        "STUDIO_RETENTION_DAYS": "30", "STUDIO_APPROVAL_TIMEOUT_S": "2592000",  # no 2.592e+06
        "STUDIO_SETUP_ALLOWLIST": ",".join(VALID_ENTRIES), "STUDIO_SETUP_TIMEOUT_S": "86400"}
    settings = _settings(data)
    assert settings.retention_days == 30 and settings.approval_timeout_s == 2592000
    assert settings.setup_allowlist == VALID_ENTRIES and settings.setup_timeout_s == 86400
    parse_allowlist(settings.setup_allowlist, addresses=True)  # what the setup phase runs
    # the API, the workers and the reaper (which applies the retention) read the ConfigMap
    for where, spec in pod_specs(objects):
        if where.startswith("Deployment/"):
            refs = [source["configMapRef"]["name"] for source in spec["containers"][0]["envFrom"]]
            assert refs == ["studio"], where
    # the Job the worker builds: the setup phase and the approval gate run in its process
    env = _pod_env(data)
    assert env["STUDIO_APPROVAL_TIMEOUT_S"] == "2592000.0"
    assert env["STUDIO_SETUP_ALLOWLIST"] == ",".join(VALID_ENTRIES)
    assert env["STUDIO_SETUP_TIMEOUT_S"] == "86400.0"
    assert "STUDIO_RETENTION_DAYS" not in env  # pruning is the reaper's, never a pod's
    for version in ("1.31.0", "1.33.0"):
        for obj in objects:
            kubernetes_validate.validate(obj, version, strict=True)
    report = helm_python.lint(CHART, values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == [] and report["messages"] == []


def test_the_production_example_prunes_and_reaches_its_package_index() -> None:
    data = _config(load_values(PRODUCTION_VALUES))
    assert data["STUDIO_RETENTION_DAYS"] == "90"
    env = _pod_env(data)
    assert "pypi.internal.example:3141" in env["STUDIO_SETUP_ALLOWLIST"].split(",")


def test_the_notes_say_who_applies_the_retention() -> None:
    assert "Retention" not in notes(None)
    assert "older than 30 days" in notes({"retention": {"days": 30}})
    # no reaper Deployment and workers with --no-reaper: nothing would prune; the notes say so
    alone = notes({"retention": {"days": 30}, "reaper": {"enabled": False}})
    assert "WARNING" in alone and "studio db prune" in alone


def test_an_empty_allowlist_means_no_host_in_the_worker_and_in_its_job() -> None:
    data = _config({"setupPhase": {"allowlist": []}})
    assert data["STUDIO_SETUP_ALLOWLIST"] == ""
    assert _settings(data).setup_allowlist == []
    env = _pod_env(data)
    assert env["STUDIO_SETUP_ALLOWLIST"] == ""  # not dropped: the pod would use the defaults
    assert StudioSettings(setup_allowlist=env["STUDIO_SETUP_ALLOWLIST"]).setup_allowlist == []


HOSTILE_ENTRIES = [
    "pypi.org,evil.example",  # a second entry smuggled through the comma-joined variable
    "pypi.org\nSTUDIO_SANDBOX: none",  # a line of its own in the ConfigMap
    " pypi.org", "user@evil.example", "http://evil.example", "evil.example/path",
    "evil.example:0", "evil.example:65536", "evil.example:443:80", "pypí.org", "",
    "-evil.example", "a..b", "x" * 64 + ".example",
]


@pytest.mark.parametrize("entry", HOSTILE_ENTRIES)
def test_hostile_allowlist_entries_are_refused_by_the_schema(entry: str) -> None:
    _refused({"setupPhase": {"allowlist": ["pypi.org", entry]}}, "/setupPhase/allowlist/1")
    # the setup phase's parser refuses them too (it strips the blanks around an entry, and the
    # comma splits the variable before it parses: the schema is the stricter of the two there)
    if entry.strip() == entry and "," not in entry:
        with pytest.raises(AllowlistError):
            parse_allowlist([entry], addresses=True)


def test_valid_entries_pass_the_schema_and_the_setup_phases_parser() -> None:
    chart = helm_python.Chart.load(CHART)
    try:
        chart.validate_schema({"setupPhase": {"allowlist": VALID_ENTRIES}})
    finally:
        chart.close()
    policy = parse_allowlist(VALID_ENTRIES, addresses=True)
    assert policy.host_allowed("files.pythonhosted.org", 443)
    assert policy.host_allowed("10.1.2.3", 3141) and not policy.host_allowed("10.1.2.3", 443)


@pytest.mark.parametrize(("change", "message"), [
    ({"retention": {"days": -1}}, "/retention/days"),
    ({"retention": {"days": 36501}}, "/retention/days"),
    ({"retention": {"days": "30"}}, "/retention/days"),
    ({"retention": {"days": 1.5}}, "/retention/days"),
    ({"retention": {"days": "30\nSTUDIO_SANDBOX: none"}}, "/retention/days"),
    ({"retention": {"keepForever": True}}, "keepForever"),
    ({"approvals": {"timeoutSeconds": 0}}, "/approvals/timeoutSeconds"),
    ({"approvals": {"timeoutSeconds": -5}}, "/approvals/timeoutSeconds"),
    ({"approvals": {"timeoutSeconds": 2592001}}, "/approvals/timeoutSeconds"),
    ({"approvals": {"timeoutSeconds": "1d"}}, "/approvals/timeoutSeconds"),
    ({"setupPhase": {"timeoutSeconds": 0}}, "/setupPhase/timeoutSeconds"),
    ({"setupPhase": {"timeoutSeconds": 86401}}, "/setupPhase/timeoutSeconds"),
    ({"setupPhase": {"timeoutSeconds": 0.5}}, "/setupPhase/timeoutSeconds"),
    ({"setupPhase": {"allowlist": "pypi.org"}}, "/setupPhase/allowlist"),
    ({"setupPhase": {"allowlist": [443]}}, "/setupPhase/allowlist/0"),
    ({"setupPhase": {"allowlist": [f"h{i}.example" for i in range(201)]}},
     "/setupPhase/allowlist"),
    ({"setupPhase": {"proxy": "http://evil.example"}}, "proxy"),
])
def test_bad_values_are_refused_with_the_schemas_message(change: dict[str, Any],
                                                        message: str) -> None:
    _refused(change, message)


def _refused(change: dict[str, Any], message: str) -> None:
    assert message in schema_refusal(change)
    report = helm_python.lint(CHART, change, strict=True, namespace=NAMESPACE)
    assert report["errors"] or [m for m in report["messages"] if m["severity"] >= 3]
