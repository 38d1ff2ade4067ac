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

from tests.support.otlp_receiver import ReceivedSpan, otlp_receiver

SECRET = "ghs_TraceContentSecret0123456789abcdef"
PROMPT = f"Write the note; the token {SECRET} must never show; marker 51c0de"
SCRIPT = {"turns": [
    {"tool_calls": [{"tool": "workspace.write_file",
                     "args": {"path": "NOTE.md", "content": f"note body 9e77 {SECRET}\n"}}]},
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


def _run(tmp_path: Path, **env_extra: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
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
         str(workspace), "--provider", "replay", "--script", str(script), "--json"],
        env=env, capture_output=True, text=True, timeout=180, check=False)
    return proc, set(json.loads(modules.read_text()))


def _spans_of_run(tmp_path: Path, capture: str | None) -> list[ReceivedSpan]:
    with otlp_receiver() as receiver:
        extra = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
        if capture is not None:
            extra["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = capture
        proc, _ = _run(tmp_path, **extra)
        assert proc.returncode == 0, proc.stderr
        return receiver.wait_for(
            lambda spans: any(s.name == "invoke_agent studio" for s in spans), timeout=30)


def test_content_capture_puts_the_conversation_in_spans_redacted(tmp_path: Path) -> None:
    spans = _spans_of_run(tmp_path, "true")
    assert {s.service for s in spans} == {"studio-run"}
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 2
    first = chats[0].attributes
    assert "51c0de" in first["gen_ai.input.messages"]  # the prompt, captured
    assert first["gen_ai.system_instructions"]
    assert "write_file" in first["gen_ai.output.messages"]
    tool = next(s for s in spans if s.name.startswith("execute_tool ")).attributes
    assert "9e77" in tool["gen_ai.tool.call.arguments"]
    assert json.loads(tool["gen_ai.tool.call.result"])["ok"] is True
    dumped = json.dumps([s.attributes for s in spans])
    assert SECRET not in dumped and "[redacted]" in dumped


@pytest.mark.parametrize("capture", [None, "false"])
def test_no_content_in_spans_by_default(tmp_path: Path, capture: str | None) -> None:
    spans = _spans_of_run(tmp_path, capture)
    assert any(s.name.startswith("execute_tool ") for s in spans)
    dumped = json.dumps([[s.attributes, s.events] for s in spans])
    for text in ("51c0de", "9e77", SECRET, "gen_ai.input.messages", "gen_ai.tool.call.arguments"):
        assert text not in dumped


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
