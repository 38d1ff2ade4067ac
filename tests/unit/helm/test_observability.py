"""The chart's observability: traces configured through the ConfigMap, the workers' metrics
port, the optional ServiceMonitors and the Grafana dashboard, whose queries name only metrics
the code exposes."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from services.api.metrics import exposition
from tests.unit.helm.chart import CHART, NAMESPACE, one, render

DASHBOARD = CHART / "dashboards" / "studio.json"
_IDENTIFIER = re.compile(r"\b(studio_[a-z0-9_]+)\b")


def _observability(otlp_endpoint: str = "") -> dict[str, Any]:
    return {"observability": {
        "otlpEndpoint": otlp_endpoint, "captureMessageContent": False,
        "metrics": {"workerPort": 9090,
                    "serviceMonitor": {"enabled": False, "interval": "30s", "labels": {}},
                    "dashboard": {"enabled": False, "labels": {"grafana_dashboard": "1"}}}}}


def exposed_sample_names() -> set[str]:
    """Every sample name the API's and the workers' /metrics can show: the families as declared
    (``prometheus_client``'s naming: counters end in ``_total``, histograms have ``_bucket``,
    ``_sum`` and ``_count``)."""
    text = exposition({"queued": 0}, {"ok": 0})
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names


def dashboard_queries() -> list[str]:
    data = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in data["panels"] for target in panel["targets"]]


def test_every_dashboard_query_names_exposed_metrics_only() -> None:
    exposed = exposed_sample_names()
    queries = dashboard_queries()
    assert len(queries) >= 12
    used = {name for expr in queries for name in _IDENTIFIER.findall(expr)}
    assert used and used - exposed == set()
    # and every family of the issue is on the dashboard
    for family in ("studio_execution_duration_seconds_bucket",
                   "studio_model_call_duration_seconds_bucket",
                   "studio_tool_call_duration_seconds_bucket", "studio_model_tokens_total",
                   "studio_model_cost_usd_total", "studio_execution_attempts_ended_total",
                   "studio_model_retries_total", "studio_lease_expirations_total",
                   "studio_execution_resumes_total", "studio_reaper_dispatches_total",
                   "studio_queue_depth", "studio_executions_running"):
        assert family in used, family


def test_the_check_above_can_fail() -> None:
    assert "studio_model_cost_usd" not in exposed_sample_names()  # a counter without _total
    assert "studio_model_call_duration_seconds" not in exposed_sample_names()


def test_dashboard_labels_are_the_families_labels() -> None:
    """``by (...)`` groups only on labels the metric has (bounded: no id, no path)."""
    labels = {"provider", "model", "outcome", "status", "domain", "operation", "direction",
              "reason", "method", "le", "state", "code"}
    for expr in dashboard_queries():
        for group in re.findall(r"by \(([^)]*)\)", expr):
            assert {g.strip() for g in group.split(",")} <= labels, expr


def test_off_by_default_no_exporter_no_monitors() -> None:
    objects = render(None)
    config = one(objects, "ConfigMap", "studio")["data"]
    assert not any(name.startswith("OTEL_") for name in config)
    assert not [o for o in objects if o["kind"] == "ServiceMonitor"]
    worker = one(objects, "Deployment", "-worker")["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"][-2:] == ["--metrics-port", "9090"]
    assert worker["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]


def test_an_endpoint_turns_traces_on_everywhere() -> None:
    objects = render(_observability("http://otel-collector.monitoring:4318"))
    config = one(objects, "ConfigMap", "studio")["data"]
    assert config["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://otel-collector.monitoring:4318"
    assert config["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == "false"


def test_service_monitors_scrape_the_api_and_the_workers() -> None:
    objects = render(_monitors())
    monitors = {o["metadata"]["name"]: o for o in objects if o["kind"] == "ServiceMonitor"}
    assert set(monitors) == {"studio-api", "studio-worker", "studio-reaper"}
    services = [o for o in objects if o["kind"] == "Service"]
    for name, monitor in monitors.items():
        assert monitor["metadata"]["labels"]["release"] == "kube-prometheus"
        assert monitor["spec"]["namespaceSelector"]["matchNames"] == [NAMESPACE]
        endpoint = monitor["spec"]["endpoints"][0]
        assert endpoint["path"] == "/metrics" and endpoint["interval"] == "15s"
        selected = [s for s in services if all(
            s["metadata"]["labels"].get(k) == v
            for k, v in monitor["spec"]["selector"]["matchLabels"].items())]
        assert len(selected) == 1, name  # one Service, and it has the scraped port
        assert endpoint["port"] in {p["name"] for p in selected[0]["spec"]["ports"]}
    for component in ("worker", "reaper"):
        metrics = one(objects, "Service", f"-{component}-metrics")
        assert metrics["spec"]["ports"][0]["port"] == 9464
        container = one(objects, "Deployment", f"-{component}")["spec"]["template"]["spec"][
            "containers"][0]
        assert container["args"][-2:] == ["--metrics-port", "9464"]


def _monitors() -> dict[str, Any]:
    values = _observability()
    metrics = values["observability"]["metrics"]
    metrics["workerPort"] = 9464
    metrics["serviceMonitor"].update(enabled=True, interval="15s",
                                     labels={"release": "kube-prometheus"})
    return values


def test_the_dashboard_configmap_holds_the_dashboard() -> None:
    values = copy.deepcopy(_observability())
    values["observability"]["metrics"]["dashboard"]["enabled"] = True
    config = one(render(values), "ConfigMap", "-dashboard")
    assert config["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(config["data"]["studio.json"]) == json.loads(DASHBOARD.read_text())
