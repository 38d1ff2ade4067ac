"""What goes into spans besides names and numbers: nothing of the conversation by default; with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` the prompt, the answers and the tool
arguments and results, redacted like the journal. And without an endpoint, no SDK at all.

Each case runs the real ``studio run --workspace`` (replay) in a subprocess exporting to the local
OTLP/HTTP receiver.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.model_server import ScriptedModelServer, error, text
from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver

SECRET = "ghs_TraceContentSecret0123456789abcdef"
API_KEY = "sk-trace-content-KEY-0a1b2c3d"
PROMPT = f"Write the note; the token {SECRET} must never show; marker 51c0de"
SCRIPT = {"turns": [
    {"tool_calls": [{"tool": "workspace.write_file",
                     "args": {"path": "NOTE.md", "content": f"note body 9e77 {SECRET}\n"}}]},
    {"tool_calls": [{"tool": "workspace.read_file", "args": {"path": "MISSING.md"}}]},
    {"final": "done"},
]}
WRAPPER = """
import json, sys
out, sys.argv = sys.argv[1], ["studio", *sys.argv[2:]]
from services.cli.main import main
try:
    main()
finally:
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
"""


def _run(tmp_path: Path, *args: str,
         **env_extra: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("STUDIO_", "OTEL_"))}
    env.update(STUDIO_DATA_DIR=str(tmp_path / "data"), STUDIO_GITHUB_TOKEN=SECRET,
               OTEL_BSP_SCHEDULE_DELAY="100", **env_extra)
    modules = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(modules), "run", PROMPT, "--workspace",
         str(workspace), "--json", *(args or ("--provider", "replay", "--script", str(script)))],
        env=env, capture_output=True, text=True, timeout=180, check=False)
    return proc, set(json.loads(modules.read_text()))


def _spans_of_run(tmp_path: Path, capture: str | None, *args: str,
                  **env_extra: str) -> list[ReceivedSpan]:
    with otlp_receiver() as receiver:
        extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, **env_extra}
        if capture is not None:
            extra["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
        proc, _ = _run(tmp_path, *args, **extra)
        assert proc.returncode == 0, proc.stderr
        return receiver.wait_for(
            lambda spans: any(s.name == "invoke_agent studio" for s in spans), timeout=30)


def test_content_capture_puts_the_conversation_in_spans_redacted(tmp_path: Path) -> None:
    spans = _spans_of_run(tmp_path, "true")
    assert {s.service for s in spans} == {"studio-run"}
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 3
    first = chats[0].attributes
    assert "51c0de" in first["gen_ai.input.messages"]  # the prompt, captured
    assert first["gen_ai.system_instructions"]
    assert "write_file" in first["gen_ai.output.messages"]
    tool = next(s for s in spans if s.name == "execute_tool workspace_write_file").attributes
    assert "9e77" in tool["gen_ai.tool.call.arguments"]
    assert json.loads(tool["gen_ai.tool.call.result"])["ok"] is True
    dumped = json.dumps([s.attributes for s in spans])
    assert SECRET not in dumped and "[redacted]" in dumped


@pytest.mark.parametrize("capture", [None, "false"])
def test_no_content_in_spans_by_default(tmp_path: Path, capture: str | None) -> None:
    spans = _spans_of_run(tmp_path, capture)
    tools = {s.name: s.attributes for s in spans if s.name.startswith("execute_tool ")}
    assert "error.type" not in tools["execute_tool workspace_write_file"]
    assert tools["execute_tool workspace_read_file"]["error.type"] == "path_not_found"
    dumped = json.dumps([[s.attributes, s.events] for s in spans])
    for seen in ("51c0de", "9e77", SECRET, "gen_ai.input.messages", "gen_ai.tool.call.arguments"):
        assert seen not in dumped


def test_without_an_endpoint_no_sdk_is_set_up(tmp_path: Path) -> None:
    proc, modules = _run(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "services.execution.agent_runtime" in modules  # the loop really ran
    loaded = sorted(m for m in modules if m.startswith(("opentelemetry.sdk",
                                                         "opentelemetry.exporter")))
    assert loaded == []


def test_with_an_endpoint_the_sdk_is_set_up(tmp_path: Path) -> None:
    """The check above can fail."""
    with otlp_receiver() as receiver:
        proc, modules = _run(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=receiver.url)
    assert proc.returncode == 0, proc.stderr
    assert "opentelemetry.sdk.trace" in modules


def test_a_retried_model_call_is_one_chat_span_with_a_retry_event(tmp_path: Path) -> None:
    steps = [error(503, {"error": {"message": "overloaded"}}, {"retry-after": "0"}),
             text("done")]
    with ScriptedModelServer(steps) as server:
        spans = _spans_of_run(tmp_path, None, "--provider", "codex",
                              OPENAI_BASE_URL=server.url + "/v1", OPENAI_API_KEY=API_KEY)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 1
    retries = [attrs for name, attrs in chats[0].events if name == "retry"]
    assert len(retries) == 1 and retries[0]["attempt"] == 1
    assert retries[0]["error.type"] and retries[0]["delay_s"] == 0
    assert chats[0].attributes["gen_ai.provider.name"] == "openai"
    assert API_KEY not in json.dumps([[s.attributes, s.events] for s in spans])
