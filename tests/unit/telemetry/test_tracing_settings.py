"""When tracing is on, what a child process or a pod is handed, and the off path's no-op spans."""

from __future__ import annotations

import pytest

from services.executors.local import executor_environment
from services.executors.selection import trace_environment
from services.settings import (
    capture_message_content,
    inherited_trace_context,
    service_name_configured,
    tracing_configured,
)
from services.telemetry import tracing

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
SOURCE = {
    "PATH": "/usr/bin", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
    "OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer secret-otlp-token",
    "OTEL_SERVICE_NAME": "studio", "TRACEPARENT": PARENT, "TRACESTATE": "vendor=1",
    "PROMETHEUS_MULTIPROC_DIR": "/tmp/metrics", "UNRELATED": "x",
}


def test_the_local_child_gets_the_trace_context_and_not_the_otlp_headers() -> None:
    env = executor_environment(SOURCE)
    assert env["TRACEPARENT"] == PARENT and env["TRACESTATE"] == "vendor=1"
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://collector:4318"
    assert env["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/metrics"  # it records into the worker's
    assert "OTEL_EXPORTER_OTLP_HEADERS" not in env and "UNRELATED" not in env


def test_a_pod_gets_the_trace_context_and_neither_headers_nor_the_metrics_dir() -> None:
    env = trace_environment(SOURCE)
    assert env == {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318",
                   "OTEL_SERVICE_NAME": "studio", "TRACEPARENT": PARENT,
                   "TRACESTATE": "vendor=1"}


@pytest.mark.parametrize(("variables", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
])
def test_tracing_is_on_with_an_endpoint_only(monkeypatch: pytest.MonkeyPatch,
                                             variables: dict[str, str], on: bool) -> None:
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert tracing_configured() is on


def test_service_name_content_capture_and_inherited_context(
        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "TRACEPARENT", "TRACESTATE",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        monkeypatch.delenv(name, raising=False)
    assert not service_name_configured() and not capture_message_content()
    assert inherited_trace_context() == {}
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=prod,service.name=s")
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE")
    monkeypatch.setenv("TRACEPARENT", PARENT)
    assert service_name_configured() and capture_message_content()
    assert inherited_trace_context() == {"traceparent": PARENT}


def test_off_spans_are_a_shared_no_op_and_nothing_propagates() -> None:
    assert tracing.configure("studio-test", endpoint_set=False, name_set=False) is False
    assert not tracing.enabled()
    with tracing.span("chat m", {"a": 1}) as first, tracing.span("execute_tool t") as second:
        first.set_attribute("b", 2)
        second.add_event("retry", {"attempt": 1})
    assert first is second is tracing.NO_SPAN
    assert tracing.carrier() == {} and tracing.environment() == {}
    assert tracing.current_traceparent() is None
    with tracing.inherited({"traceparent": PARENT}):
        assert tracing.current_traceparent() is None
