"""The turn-based providers (codex responses, codex chat, gemini): harness runs and their floors.

*Harness*: FrontierAgent over the provider's adapter (the real SDK client over real HTTP), the
real dispatcher and the default registry, the command domain running ``true`` in the given
sandbox. Events go to an in-memory sink (no journal: the database is not part of this measure).

*Floor*: one keep-alive :mod:`http.client` connection sending, by hand, the same wire format
(system prompt, the same tool declarations, the growing conversation, envelopes as tool
results), spawning the same sandboxed ``true`` per step, parsing the answer minimally. The tool
declarations are rendered once, before the clock starts, by the adapters' own pure wire
functions so both loops send the same bytes for them.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.overhead_common import (
    API_KEY,
    CODEX_MODEL,
    GEMINI_MODEL,
    TASK,
    TOOL,
    Clock,
    FloorCommand,
    RunTiming,
    envelope,
    neutral_tools,
    served,
    timing,
)
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.guards import AgentLimits
from services.execution.outcomes import Outcome
from services.execution.ports import AgentEventKind, CommandSandbox, ModelClient
from services.execution.prompts import system_prompt
from services.execution.providers import codex_wire, gemini_wire
from services.execution.providers.codex import CodexClient
from services.execution.providers.gemini import GeminiClient
from services.execution.sinks import MemorySink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry

WIRES = ("responses", "chat", "gemini")
LABELS = {"responses": "codex (responses)", "chat": "codex (chat)", "gemini": "gemini"}


# ------------------------------------------------------------------ harness


def _client(wire: str, url: str) -> ModelClient:
    if wire == "gemini":
        return GeminiClient(model=GEMINI_MODEL, api_key=API_KEY, base_url=url)
    if wire == "chat":
        return CodexClient(model=CODEX_MODEL, api_key=API_KEY, base_url=url + "/v1", mode="chat")
    return CodexClient(model=CODEX_MODEL, api_key=API_KEY, base_url=url + "/v1")


def _check_run(sink: MemorySink, n: int, sandbox: CommandSandbox) -> None:
    results = sink.of_kind(AgentEventKind.TOOL_RESULT)
    bad = [e.data["envelope"] for e in results
           if not e.data["envelope"].get("ok")
           or e.data["envelope"]["result"].get("exit_code") != 0
           or e.data["envelope"]["result"].get("sandbox") != sandbox.mode]
    if len(results) != n or bad:
        raise RuntimeError(f"harness: {len(results)} tool results, bad: {bad[:1]}")


async def _harness_async(wire: str, sandbox: CommandSandbox, n: int, workspace: Path,
                         url: str) -> tuple[float, float]:
    client = _client(wire, url)
    ctx = ToolDomainContext(workspace_root=workspace, execution_id=f"bench-{uuid.uuid4()}",
                            request_id="bench", correlation_id="bench", sandbox=sandbox)
    sink = MemorySink()
    deps = AgentDeps(dispatcher=Dispatcher(default_registry()), ctx=ctx, sink=sink,
                     limits=AgentLimits(max_iterations=n + 2))
    agent = FrontierAgent(client, deps)
    try:
        clock = Clock.start()
        result = await agent.run(TASK)
        elapsed = clock.elapsed()
    finally:
        await client.aclose()
    if result.outcome is not Outcome.FINISHED or result.iterations != n + 1:
        raise RuntimeError(f"harness {wire}: {result.outcome} after {result.iterations} turns "
                           f"({result.error})")
    _check_run(sink, n, sandbox)
    return elapsed


def harness(wire: str, sandbox: CommandSandbox, n: int, workspace: Path) -> RunTiming:
    with served(n, TOOL) as server:
        elapsed = asyncio.run(_harness_async(wire, sandbox, n, workspace, server.url))
    return timing(n, elapsed, server)


# ------------------------------------------------------------------ floor


class _Wire:
    """Hand-built bodies of one wire format: the static head, the growing conversation.

    Like any sensible hand-written loop, it serializes each conversation entry once and splices
    the bytes (the entries never change once sent); only the server's parsing grows with N.
    """

    def __init__(self, wire: str, system: str) -> None:
        tools = neutral_tools()
        self.wire = wire
        if wire == "responses":
            self.path = "/v1/responses"
            self.head: dict[str, Any] = {
                "model": CODEX_MODEL, "instructions": system, "store": False,
                "tool_choice": "auto", "parallel_tool_calls": True,
                "include": ["reasoning.encrypted_content"],
                "tools": codex_wire.responses_tools(tools),
            }
            self.key = "input"
            self.history: list[dict[str, Any]] = [{"role": "user", "content": TASK}]
        elif wire == "chat":
            self.path = "/v1/chat/completions"
            self.head = {"model": CODEX_MODEL, "tool_choice": "auto",
                         "parallel_tool_calls": True, "tools": codex_wire.chat_tools(tools)}
            self.key = "messages"
            self.history = [{"role": "system", "content": system},
                            {"role": "user", "content": TASK}]
        else:
            self.path = f"/v1/models/{GEMINI_MODEL}:generateContent"
            self.head = {"systemInstruction": {"parts": [{"text": system}]},
                         "tools": gemini_wire.function_declarations(tools),
                         "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}
            self.key = "contents"
            self.history = [{"role": "user", "parts": [{"text": TASK}]}]
        self.rendered: list[bytes] = []
        self.prefix = b""
        self.headers = {"Content-Type": "application/json"}
        if wire == "gemini":
            self.headers["x-goog-api-key"] = API_KEY
        else:
            self.headers["Authorization"] = f"Bearer {API_KEY}"

    def body(self) -> bytes:
        """The head and the history; each history entry is serialized once, when it is new."""
        for item in self.history[len(self.rendered):]:
            self.rendered.append(_dumps(item))
        if not self.prefix:
            self.prefix = _dumps(self.head)[:-1] + b',"' + self.key.encode() + b'":['
        return self.prefix + b",".join(self.rendered) + b"]}"

    def calls(self, data: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
        """``(call id, name, args)`` of the answer; its model turn joins the history."""
        if self.wire == "responses":
            items = [i for i in data["output"] if i["type"] == "function_call"]
            self.history += [{"type": "function_call", "call_id": i["call_id"], "name": i["name"],
                              "arguments": i["arguments"]} for i in items]
            return [(i["call_id"], i["name"], json.loads(i["arguments"])) for i in items]
        if self.wire == "chat":
            message = data["choices"][0]["message"]
            found = message.get("tool_calls") or []
            self.history.append({"role": "assistant", "content": message.get("content"),
                                 "tool_calls": found} if found else message)
            return [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
                    for c in found]
        content = data["candidates"][0]["content"]
        self.history.append(content)
        return [(f"{len(self.history)}-{i}", p["functionCall"]["name"], p["functionCall"]["args"])
                for i, p in enumerate(content["parts"]) if "functionCall" in p]

    def results(self, answered: list[tuple[str, str, dict[str, Any]]]) -> None:
        """``(call id, name, envelope)`` of each call joins the history as a tool result."""
        if self.wire == "responses":
            self.history += [{"type": "function_call_output", "call_id": cid,
                              "output": json.dumps(env, separators=(",", ":"))}
                             for cid, _, env in answered]
        elif self.wire == "chat":
            self.history += [{"role": "tool", "tool_call_id": cid,
                              "content": json.dumps(env, separators=(",", ":"))}
                             for cid, _, env in answered]
        else:
            self.history.append({"role": "user", "parts": [
                {"functionResponse": {"name": name, "response": env}}
                for _, name, env in answered]})


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _connect(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port))
    conn.connect()
    if conn.sock is not None:
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _floor_loop(wire: _Wire, conn: http.client.HTTPConnection,
                run: Callable[[list[str]], dict[str, Any]]) -> int:
    """The loop itself; answers how many commands ran."""
    ran = 0
    while True:
        conn.request("POST", wire.path, body=wire.body(), headers=wire.headers)
        reply = conn.getresponse()
        data = json.loads(reply.read())
        if reply.status != 200:
            raise RuntimeError(f"floor {wire.wire}: HTTP {reply.status}: {data}")
        calls = wire.calls(data)
        if not calls:
            return ran
        answered = []
        for call_id, name, args in calls:
            answered.append((call_id, name, envelope(call_id, run(args["argv"]))))
            ran += 1
        wire.results(answered)


def floor(wire_name: str, sandbox: CommandSandbox, n: int, workspace: Path) -> RunTiming:
    system = system_prompt("repository work", neutral_tools(), "")
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as scratch, \
            served(n, TOOL) as server:
        command = FloorCommand(sandbox, workspace, Path(scratch))
        wire = _Wire(wire_name, system)
        clock = Clock.start()
        conn = _connect(server.url)
        try:
            ran = _floor_loop(wire, conn, command.run)
        finally:
            conn.close()
        elapsed = clock.elapsed()
    if ran != n:
        raise RuntimeError(f"floor {wire_name}: ran {ran} commands, expected {n}")
    return timing(n, elapsed, server)
