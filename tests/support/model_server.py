"""A scripted model server on 127.0.0.1 standing for the OpenAI, Google Gemini and Anthropic APIs.

The real SDKs (``openai``, ``google-genai``, the Claude Code CLI of ``claude-agent-sdk``) talk to
it over real HTTP, in their vendors' wire formats:

- OpenAI ``POST /v1/responses`` (SSE when the body says ``stream: true``, as the Codex CLI asks)
  and ``POST /v1/chat/completions``;
- Gemini ``POST /v1/models/{model}:generateContent`` and ``:streamGenerateContent?alt=sse``
  (``/v1beta/`` too);
- Anthropic ``POST /v1/messages`` (any query string, e.g. Claude Code's ``?beta=true``), SSE when
  the body says ``stream: true``.

Anything else gets a 404, is logged and lands in ``server.unmatched``. Each request takes the next
step of the script (see ``tests.support.model_script``); once the script is exhausted the server
answers the fallback text (``"done"``), so a client never hangs on it. Every request is recorded
(``server.requests``) with its turn and attempt numbers.

Usage::

    with ScriptedModelServer([tool_calls([("add", {"a": 1})]), text("3")]) as server:
        client = OpenAI(api_key="k", base_url=server.url + "/v1")
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from tests.support.model_checks import (
    assert_no_credential_outside_auth,
    assert_tool_names_valid,
    check_tool_schema,
)
from tests.support.model_context import ContextMeter
from tests.support.model_replies import HttpReply, render, render_error
from tests.support.model_requests import (
    AssistantTurn,
    DeclaredTool,
    RequestRecord,
    ToolResult,
    assistant_tool_turns,
    declared_tools,
    tool_results,
)
from tests.support.model_script import (
    Error,
    Hang,
    Reply,
    Script,
    Step,
    Text,
    ToolCalls,
    Usage,
    error,
    hang,
    text,
    tool_calls,
)

__all__ = [
    "AssistantTurn", "DeclaredTool", "RequestRecord", "ScriptedModelServer", "ToolResult", "Usage",
    "assert_no_credential_outside_auth", "assert_tool_names_valid", "check_tool_schema", "error",
    "hang", "text", "tool_calls",
]

log = logging.getLogger(__name__)

_GEMINI_PATH = re.compile(
    r"^/(?:v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):(?P<api>generateContent|streamGenerateContent)$"
)
_FIXED_ROUTES = {
    "/v1/responses": ("openai", "responses"),
    "/v1/chat/completions": ("openai", "chat"),
    "/v1/messages": ("anthropic", "messages"),
}


def route(path: str) -> tuple[str, str, str | None] | None:
    """``(vendor, api, model from the path)`` for a known endpoint, else None."""
    if path in _FIXED_ROUTES:
        vendor, api = _FIXED_ROUTES[path]
        return vendor, api, None
    match = _GEMINI_PATH.match(path)
    if match:
        return "gemini", match["api"], match["model"]
    return None


class ScriptedModelServer:
    """The server, its script and its record of requests; a context manager that always stops."""

    def __init__(self, script: Script = (), *, fallback: str = "done",
                 fallback_usage: Usage | None = None, meter: ContextMeter | None = None) -> None:
        self.meter = meter  # counts tokens, enforces a window, reports cached prefixes
        self._steps: deque[Step] = deque(script)
        self._step_count = 0
        self._fallback = Text(fallback, fallback_usage or Usage())
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._id_counts: dict[str, itertools.count[int]] = {}
        self._turn = 0
        self._attempt = 0
        self.requests: list[RequestRecord] = []
        self.unmatched: list[RequestRecord] = []
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash, no version prefix)."""
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ScriptedModelServer:
        """Bind an ephemeral port on 127.0.0.1 and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("already started")
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="scripted-model-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket; hung steps are released. Safe to call twice."""
        self._stopping.set()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        try:
            httpd.shutdown()
        finally:
            httpd.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedModelServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # --- script ------------------------------------------------------------------------------

    def extend(self, steps: Iterable[Step]) -> None:
        """Append steps to the script (e.g. from a fixture that started the server empty)."""
        with self._lock:
            self._steps.extend(steps)

    @property
    def remaining_steps(self) -> int:
        with self._lock:
            return len(self._steps)

    def new_id(self, prefix: str) -> str:
        """``call_1``, ``call_2``... one counter per prefix."""
        with self._lock:
            counter = self._id_counts.setdefault(prefix, itertools.count(1))
            return f"{prefix}_{next(counter)}"

    def _take(self, record: RequestRecord) -> tuple[RequestRecord, Reply]:
        with self._lock:
            step: Step | None = self._steps.popleft() if self._steps else None
            index = None
            if step is not None:
                index = self._step_count
                self._step_count += 1
            self._attempt += 1
            record = replace(record, turn=self._turn, attempt=self._attempt, step_index=index)
            self.requests.append(record)
        reply = self._fallback if step is None else step(record) if callable(step) else step
        if not isinstance(reply, Error | Hang):
            with self._lock:
                self._turn += 1
                self._attempt = 0
        if isinstance(reply, Hang):
            self._stopping.wait(reply.seconds)
            reply = reply.then or self._fallback
        return record, reply

    def answer(self, record: RequestRecord) -> HttpReply:
        """Take the next step for ``record`` and render it."""
        measured = self.meter.measure(record) if self.meter is not None else None
        if self.meter is not None and measured is not None and measured.rejected:
            return render_error(record, self.meter.rejection(record, measured))
        record, reply = self._take(record)
        if isinstance(reply, Error):
            return render_error(record, reply)
        if isinstance(reply, Hang):  # a Hang whose ``then`` is another Hang: answer the fallback
            reply = self._fallback
        if self.meter is not None and measured is not None:
            reply = self.meter.with_usage(reply, record, measured)
        return render(record, reply, self.new_id)

    # --- reading what was sent ---------------------------------------------------------------

    def requests_for(self, vendor: str, api: str | None = None) -> list[RequestRecord]:
        """Requests of one vendor (``openai``, ``gemini``, ``anthropic``), optionally one api."""
        return [r for r in self.requests
                if r.vendor == vendor and (api is None or r.api == api)]

    def attempts(self, turn: int) -> int:
        """How many requests the logical model turn ``turn`` took (retries included)."""
        return sum(1 for r in self.requests if r.turn == turn)

    @staticmethod
    def declared_tools(record: RequestRecord) -> list[DeclaredTool]:
        return declared_tools(record)

    @staticmethod
    def tool_results(record: RequestRecord) -> list[ToolResult]:
        return tool_results(record)

    @staticmethod
    def assistant_tool_turns(record: RequestRecord) -> list[AssistantTurn]:
        return assistant_tool_turns(record)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 model: ScriptedModelServer) -> None:
        super().__init__(address, handler)
        self.model = model


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        self._handle()

    def do_GET(self) -> None:  # noqa: N802
        self._handle()

    def do_PUT(self) -> None:  # noqa: N802
        self._handle()

    def do_DELETE(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        raw = self._read_body()
        url = urlsplit(self.path)
        found = route(url.path) if self.command == "POST" else None
        vendor, api, model = found or ("unknown", "", None)
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        if model is None and isinstance(body, dict) and isinstance(body.get("model"), str):
            model = body["model"]
        record = RequestRecord(
            vendor=vendor, api=api, method=self.command, path=url.path, query=url.query,
            headers={k.lower(): v for k, v in self.headers.items()}, raw_body=raw, body=body,
            model=model,
        )
        model_server = self.server.model
        if found is None:
            log.warning("scripted model server: no route for %s %s", self.command, self.path)
            model_server.unmatched.append(record)
            self._send(HttpReply(404, json.dumps({"error": {"message": "not found"}}).encode()))
            return
        if api == "chat" and record.stream:
            log.warning("scripted model server: streaming is not scripted for %s", url.path)
            self._send(HttpReply(400, b'{"error": {"message": "stream not supported here"}}'))
            return
        self._send(model_server.answer(record))

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                chunk = self.rfile.read(size + 2)[:size]
                if size == 0:
                    break
                chunks.append(chunk)
            return b"".join(chunks)
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length else b""

    def _send(self, reply: HttpReply) -> None:
        try:
            self._write(reply)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout): fine
            log.debug("scripted model server: client went away before the reply to %s", self.path)
            self.close_connection = True

    def _write(self, reply: HttpReply) -> None:
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (stdlib signature)
        log.debug("scripted model server: " + format, *args)


# Re-exported step types, so tests import everything from one place.
__all__ += ["Error", "Hang", "Script", "Step", "Text", "ToolCalls"]
