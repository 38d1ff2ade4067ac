"""Small clients for the API tests: create a replay execution, wait for it, read SSE."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx2

from tests.integration.api.server import ApiServer

FINAL = {"succeeded", "failed", "cancelled", "stalled"}


def slow_script(seconds: int = 2) -> dict[str, Any]:
    """write a file, run ``sleep``, write another file, answer."""
    return {"turns": [
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "a.txt", "content": "one\n"}}]},
        {"tool_calls": [{"tool": "command.run",
                         "args": {"argv": ["sleep", str(seconds)], "timeout_s": 60}}]},
        {"tool_calls": [{"tool": "workspace.write_file",
                         "args": {"path": "b.txt", "content": "two\n"}},
                        {"tool": "workspace.read_file", "args": {"path": "missing.txt"}}]},
        {"final": "done"},
    ]}


def create(api: ApiServer, script: dict[str, Any], **extra: Any) -> str:
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "replay it",
            "replay_script": script, **extra}
    with api.client(api.admin) as client:
        response = client.post("/api/executions", json=body)
    assert response.status_code == 202, response.text
    execution_id: str = response.json()["id"]
    return execution_id


def wait_final(api: ApiServer, execution_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with api.client(api.admin) as client:
        while time.monotonic() < deadline:
            row: dict[str, Any] = client.get(f"/api/executions/{execution_id}").json()
            if row["status"] in FINAL:
                return row
            time.sleep(0.1)
    raise AssertionError(f"execution {execution_id} did not finish:\n" + "".join(api.log[-40:]))


@dataclass(frozen=True)
class SseEvent:
    id: int
    kind: str
    data: dict[str, Any]


def parse_block(block: str) -> SseEvent | None:
    fields: dict[str, str] = {}
    for line in block.split("\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        fields[name] = value[1:] if value.startswith(" ") else value
    if "data" not in fields:
        return None
    return SseEvent(id=int(fields["id"]), kind=fields["event"], data=json.loads(fields["data"]))


def sse_events(response: httpx2.Response) -> Iterator[SseEvent]:
    """The events of a streamed SSE response, as they arrive."""
    buffer = ""
    for chunk in response.iter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            event = parse_block(block)
            if event is not None:
                yield event


def read_all(api: ApiServer, execution_id: str, last_event_id: int | None = None) -> list[SseEvent]:
    headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
    with api.client(api.admin) as client, client.stream(
            "GET", f"/api/executions/{execution_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.read()
        return list(sse_events(response))
