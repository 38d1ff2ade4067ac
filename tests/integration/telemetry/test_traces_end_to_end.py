"""One trace per execution, from the API request to the pull request, for every provider; and the
metrics of the API and of the worker afterwards.

The real ``studio api`` and ``studio worker`` (``--metrics-port``) run as processes on the Redis
broker, exporting over OTLP/HTTP to the local receiver (``tests.support.otlp_receiver``); the
worker runs the execution in a ``studio execute`` child. codex, gemini and claude talk to the
scripted model server through their SDKs, replay follows its script; the agent edits a file and
finishes, finalization commits, pushes and opens the pull request on the GitHub API double.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.execution.providers.claude_tools import allowed_tool_name
from tests.integration.api.helpers import wait_final
from tests.integration.api.server import ApiServer, api_process
from tests.integration.celery_fixtures import Broker, WorkerProcess, start_worker, wait_for
from tests.integration.repo_env import DONE, TOKEN, RepoWorld, repo_world
from tests.support.model_script import Step, Usage, text, tool_calls
from tests.support.model_server import ScriptedModelServer
from tests.support.otlp_receiver import OtlpReceiver, ReceivedSpan, otlp_receiver

pytestmark = pytest.mark.slow

PROVIDERS = ("codex", "gemini", "claude", "replay")
GENAI_PROVIDER = {"codex": "openai", "gemini": "gcp.gemini", "claude": "anthropic",
                  "replay": "studio.replay"}
API_KEY = "sk-trace-PROVIDERKEY-9d2e7c1a4b"
PROMPT = "Fix add so that it returns the sum; secret-free prompt marker 7f3a91"
EDIT = {"path": "calc.py", "old_text": "a - b", "new_text": "a + b"}
PIPELINE_SPANS = {"studio.execute", "studio.lease.claim", "studio.provision",
                  "studio.checkpoint", "studio.finalize", "studio.commit", "studio.push",
                  "studio.pull_request"}


def _steps(provider: str) -> list[Step]:
    name = allowed_tool_name("workspace_edit_file") if provider == "claude" \
        else "workspace_edit_file"
    return [tool_calls([(name, EDIT)]), text(json.dumps(DONE), usage=Usage(200, 40))]


def _replay_script() -> dict[str, Any]:
    usage = {"input_tokens": 100, "output_tokens": 20}
    return {"turns": [{"tool_calls": [{"tool": "workspace.edit_file", "args": EDIT}],
                       "usage": usage},
                      {"final": DONE, "usage": usage}]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def world(tmp_path: Path) -> Iterator[RepoWorld]:
    with repo_world(tmp_path) as world:
        yield world


def _env(world: RepoWorld, tmp_path: Path, broker: Broker, receiver: OtlpReceiver,
         model_url: str | None) -> dict[str, str]:
    env = world.env(tmp_path / "workspaces", STUDIO_BROKER_URL=broker.url,
                    STUDIO_WORKER_QUEUE=broker.queue,
                    OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url, OTEL_BSP_SCHEDULE_DELAY="100")
    for name in ("OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "PROMETHEUS_MULTIPROC_DIR",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "OTEL_SDK_DISABLED"):
        env.pop(name, None)
    if model_url is not None:
        env.update(OPENAI_BASE_URL=model_url + "/v1", OPENAI_API_KEY=API_KEY,
                   GOOGLE_GEMINI_BASE_URL=model_url, GEMINI_API_KEY=API_KEY,
                   ANTHROPIC_BASE_URL=model_url, ANTHROPIC_API_KEY=API_KEY)
    return env


def _create(api: ApiServer, provider: str) -> str:
    body: dict[str, Any] = {"repo_url": api.repo_url, "provider": provider, "prompt": PROMPT,
                            "pull_request": True}
    if provider == "replay":
        body["replay_script"] = _replay_script()
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 202, response.text
    execution_id: str = response.json()["id"]
    return execution_id


def _samples(text_body: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text_body):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def _value(samples: dict[str, list[tuple[dict[str, str], float]]], name: str,
           **labels: str) -> float:
    return sum(value for found, value in samples.get(name, [])
               if all(found.get(k) == v for k, v in labels.items()))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_trace_from_the_api_to_the_pull_request_and_metrics_after_it(
        provider: str, world: RepoWorld, tmp_path: Path, redis_broker: Broker) -> None:
    server = ScriptedModelServer(_steps(provider)) if provider != "replay" else None
    if server is not None:
        server.start()
    worker: WorkerProcess | None = None
    try:
        with otlp_receiver() as receiver:
            env = _env(world, tmp_path, redis_broker, receiver,
                       server.url if server is not None else None)
            metrics_port = _free_port()
            worker = start_worker(env, tmp_path / "worker.log", "--concurrency", "1",
                                  "--metrics-port", str(metrics_port))
            with api_process(env, world.url) as api:
                execution_id = _create(api, provider)
                row = wait_final(api, execution_id, timeout=240)
                assert row["status"] == "succeeded", (row, worker.log())
                assert row["pr_url"]
                spans = receiver.wait_for(lambda s: _complete(s, execution_id), timeout=60)
                _check_trace(spans, execution_id, provider, row)
                with httpx2.Client(timeout=30) as client:
                    api_metrics = client.get(f"{api.url}/metrics").text
                    worker_metrics = wait_for("the worker's metrics endpoint", lambda: _get(
                        client, f"http://127.0.0.1:{metrics_port}/metrics"), 30)
            _check_api_metrics(_samples(api_metrics))
            _check_worker_metrics(_samples(worker_metrics), provider)
    finally:
        if worker is not None:
            worker.stop()
        if server is not None:
            server.stop()


def _get(client: httpx2.Client, url: str) -> str | None:
    try:
        return client.get(url).text
    except httpx2.TransportError:
        time.sleep(0.2)
        return None


def _complete(spans: list[ReceivedSpan], execution_id: str) -> bool:
    """Every part has arrived: the API's request, the worker's task, the child's pipeline."""
    names = {s.name for s in spans if s.attributes.get("studio.execution_id") == execution_id}
    services = {s.service for s in spans}
    return (names >= PIPELINE_SPANS and "invoke_agent studio" in names
            and {"studio-api", "studio-worker", "studio-execute"} <= services
            and any(s.name.startswith("run/") for s in spans))


def _check_trace(spans: list[ReceivedSpan], execution_id: str, provider: str,
                 row: dict[str, Any]) -> None:
    ours = [s for s in spans if s.attributes.get("studio.execution_id") == execution_id]
    trace_ids = {s.trace_id for s in ours}
    assert len(trace_ids) == 1, trace_ids
    trace = [s for s in spans if s.trace_id in trace_ids]
    assert {"studio-api", "studio-worker", "studio-execute"} <= {s.service for s in trace}
    by_id = {s.span_id: s for s in trace}
    request = [s for s in trace if s.service == "studio-api" and s.parent_span_id == ""]
    assert [s.name for s in request] == ["POST /api/executions"]  # the root: the API request
    assert request[0].attributes["studio.request_id"] and request[0].attributes[
        "studio.correlation_id"]
    task = [s for s in trace if s.service == "studio-worker" and s.name.startswith("run/")]
    assert len(task) == 1 and task[0].name == "run/studio.execute_node"
    child_root = next(s for s in trace if s.name == "studio.execute")
    assert child_root.service == "studio-execute" and child_root.parent_span_id == task[0].span_id

    agent = [s for s in trace if s.name == "invoke_agent studio"]
    assert len(agent) == 1
    attrs = agent[0].attributes
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.provider.name"] == GENAI_PROVIDER[provider]
    assert attrs["gen_ai.agent.name"] == "studio"
    assert attrs["gen_ai.request.model"] and attrs["studio.outcome"] == "finished"
    assert attrs["studio.request_id"] and attrs["studio.correlation_id"] == execution_id
    assert attrs["gen_ai.usage.input_tokens"] == row["usage"]["input_tokens"] > 0

    chats = [s for s in trace if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chats and all(s.name == f"chat {attrs['gen_ai.request.model']}" for s in chats)
    assert all(by_id[s.parent_span_id] is agent[0] for s in chats)
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) \
        == row["usage"]["input_tokens"]
    for chat in chats:
        assert chat.attributes["gen_ai.response.model"]
        assert chat.attributes["gen_ai.response.finish_reasons"]
        assert "studio.cost_usd" in chat.attributes
    if provider in ("codex", "gemini", "claude"):
        assert all(s.attributes["gen_ai.usage.output_tokens"] > 0 for s in chats)

    # (the MCP SDK under the claude adapter's tool server adds a "tools/call" span of its own)
    tools = [s for s in trace if s.name.startswith("execute_tool ")]
    assert len(tools) == 1, [(t.attributes, t.parent_span_id) for t in tools]
    assert agent[0].span_id in _ancestors(tools[0], by_id)
    tool = tools[0].attributes
    assert tools[0].name == "execute_tool workspace_edit_file"
    assert (tool["gen_ai.tool.name"], tool["gen_ai.tool.type"]) == ("workspace_edit_file",
                                                                  "function")
    assert tool["gen_ai.tool.call.id"] and "error.type" not in tool
    assert (tool["studio.domain"], tool["studio.operation"]) == ("workspace", "edit_file")
    assert tool["studio.cycle"] >= 0 and tool["studio.correlation_id"] == execution_id
    # the SQLAlchemy instrumentation's statement spans, in the worker and in the child
    sql = {s.service for s in trace
           if {"db.statement", "db.query.text"} & set(s.attributes)}
    assert {"studio-worker", "studio-execute"} <= sql
    # the pipeline's own spans, in the child's trace
    assert {s.name for s in trace} >= PIPELINE_SPANS
    pr = next(s for s in trace if s.name == "studio.pull_request")
    assert str(pr.attributes["studio.pr_number"]) in row["pr_url"]
    # no secret, and (content capture off) no prompt, in any attribute or event
    dumped = json.dumps([[s.attributes, s.events] for s in spans])
    for secret in (TOKEN, API_KEY):
        assert secret not in dumped
    assert "7f3a91" not in dumped and "a + b" not in dumped


def _check_api_metrics(samples: dict[str, list[tuple[dict[str, str], float]]]) -> None:
    assert _value(samples, "studio_executions_finished_total", status="succeeded") >= 1
    assert _value(samples, "studio_executions", status="succeeded") >= 1
    assert _value(samples, "studio_tool_calls_total", outcome="ok") >= 1
    assert _value(samples, "studio_api_requests_total", method="POST", status="2xx") >= 1
    assert "studio_queue_depth" in samples and "studio_executions_running" in samples


def _check_worker_metrics(samples: dict[str, list[tuple[dict[str, str], float]]],
                          provider: str) -> None:
    assert _value(samples, "studio_execution_duration_seconds_count", provider=provider,
                  outcome="finished") == 1
    assert _value(samples, "studio_execution_attempts_ended_total", status="succeeded") == 1
    model_calls = [labels for labels, value in
                   samples["studio_model_call_duration_seconds_count"] if value > 0]
    assert model_calls and all(set(labels) == {"provider", "model"} for labels in model_calls)
    assert {labels["provider"] for labels in model_calls} == {provider}
    assert _value(samples, "studio_tool_call_duration_seconds_count", domain="workspace",
                  operation="edit_file", outcome="ok") == 1
    assert _value(samples, "studio_model_tokens_total", provider=provider,
                  direction="input") > 0
    assert _value(samples, "studio_model_tokens_total", provider=provider,
                  direction="output") > 0


def _ancestors(span: ReceivedSpan, by_id: dict[str, ReceivedSpan]) -> list[str]:
    found = []
    while span.parent_span_id in by_id:
        found.append(span.parent_span_id)
        span = by_id[span.parent_span_id]
    return found
