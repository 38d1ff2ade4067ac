"""The vendors' token counting, context window and implicit prompt caching, for the scripted model
server (``ScriptedModelServer(meter=ContextMeter(window=...))``).

It stands for what the real APIs do with a request's size, which the scripted replies cannot know:

- **counting**: a request's prompt is its tool declarations, its system prompt and its history
  items, in that order (the order the vendors cache in); each item counts one token per four
  bytes of its compact JSON;
- **the window**: a prompt of more tokens than ``window`` is refused with the vendor's own 400
  (OpenAI ``context_length_exceeded``, Gemini ``INVALID_ARGUMENT`` "exceeds the maximum number of
  tokens", Anthropic "prompt is too long"); the script step is not consumed;
- **caching**: the longest leading run of items this prompt shares with any earlier request is
  reported cached the vendor's way: OpenAI ``cached_tokens`` from 1,024 tokens in steps of 128,
  Gemini ``cachedContentTokenCount`` from 1,024, Anthropic ``cache_read_input_tokens`` (its
  ``input_tokens`` then counts only the rest) when the request marks ``cache_control``;
- **recording**: every request's count, cached part, whether it was refused and whether it
  extends the previous request; for the OpenAI Responses API that is checked on the raw bytes
  (the previous body up to the end of its ``input`` array is a prefix of this one, and the tool
  declarations are the same bytes).

The measured counts replace the usage a scripted reply states (its output tokens are kept).
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from tests.support.model_requests import RequestRecord
from tests.support.model_script import Error, Text, ToolCalls, Usage

MIN_CACHED = 1024
OPENAI_CACHE_STEP = 128


@dataclass(frozen=True)
class Measured:
    """One request as the meter saw it."""

    vendor: str
    api: str
    tokens: int
    cached: int
    rejected: bool
    extends_previous: bool
    raw_body: bytes = field(repr=False, default=b"")


def _dump(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _unmarked(value: Any) -> Any:
    """``value`` without Anthropic's ``cache_control`` marks (they move to the newest turn on
    every request; the cache matches the content, not the marks)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def prompt_items(record: RequestRecord) -> list[bytes]:
    """The prompt of ``record`` in caching order: tools, system prompt, history items."""
    body = record.body if isinstance(record.body, dict) else {}
    if record.vendor == "gemini":
        head = [body.get("tools"), body.get("systemInstruction") or body.get("system_instruction")]
        history = body.get("contents") or []
    elif record.vendor == "anthropic":
        head = [_unmarked(body.get("tools")), _unmarked(body.get("system"))]
        history = _unmarked(body.get("messages") or [])
    elif record.api == "chat":
        head = [body.get("tools")]
        history = body.get("messages") or []
    else:
        head = [body.get("tools"), body.get("instructions")]
        history = body.get("input") or []
        history = [history] if isinstance(history, str) else history
    return [_dump(item) for item in [*head, *history]]


def item_tokens(item: bytes) -> int:
    return (len(item) + 3) // 4


def _responses_prefix(raw: bytes) -> tuple[bytes, bytes]:
    """``(body up to the end of its input array, tool declarations)`` of a Responses body as the
    codex adapter lays it out (head, input, tools)."""
    cut = raw.rfind(b'],"tools":')
    if cut < 0:
        return raw[:-2], b""
    return raw[:cut], raw[cut:]


class ContextMeter:
    """Counts, caps and caches requests (see the module docstring); thread-safe."""

    def __init__(self, window: int | None = None) -> None:
        self.window = window
        self.measured: list[Measured] = []
        self._seen: dict[str, int] = {}  # digest of a prompt prefix -> its tokens
        self._lock = threading.Lock()
        self._previous: RequestRecord | None = None

    def measure(self, record: RequestRecord) -> Measured:
        items = prompt_items(record)
        tokens = sum(item_tokens(i) for i in items)
        with self._lock:
            rejected = self.window is not None and tokens > self.window
            cached = 0 if rejected else self._cached(record, items)
            extends = self._extends(record)
            found = Measured(record.vendor, record.api, tokens, cached, rejected, extends,
                             record.raw_body)
            self.measured.append(found)
            if not rejected:
                self._previous = record
        return found

    def _cached(self, record: RequestRecord, items: list[bytes]) -> int:
        digest = hashlib.sha256()
        shared = running = 0
        for item in items:
            digest.update(hashlib.sha256(item).digest())
            running += item_tokens(item)
            key = digest.hexdigest()
            if key in self._seen:
                shared = running
            self._seen.setdefault(key, running)
        if record.vendor == "anthropic" and b"cache_control" not in record.raw_body:
            return 0
        if shared < MIN_CACHED:
            return 0
        if record.vendor == "openai":
            return shared - shared % OPENAI_CACHE_STEP
        return shared

    def _extends(self, record: RequestRecord) -> bool:
        previous = self._previous
        if previous is None or previous.vendor != record.vendor:
            return False
        if record.vendor == "openai" and record.api == "responses":
            head, tools = _responses_prefix(previous.raw_body)
            _, now_tools = _responses_prefix(record.raw_body)
            return record.raw_body.startswith(head) and tools == now_tools
        before, now = prompt_items(previous), prompt_items(record)
        return now[:len(before)] == before

    def rejection(self, record: RequestRecord, measured: Measured) -> Error:
        """The vendor's 400 for a prompt longer than the window."""
        over = f"{measured.tokens} tokens > {self.window} maximum"
        if record.vendor == "gemini":
            return Error(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": (
                f"The input token count ({measured.tokens}) exceeds the maximum number of "
                f"tokens allowed ({self.window}).")}})
        if record.vendor == "anthropic":
            return Error(400, {"type": "error", "error": {
                "type": "invalid_request_error", "message": f"prompt is too long: {over}"}})
        return Error(400, {"error": {
            "message": f"Your input exceeds the context window of this model ({over}).",
            "type": "invalid_request_error", "param": "input",
            "code": "context_length_exceeded"}})

    @staticmethod
    def with_usage(reply: Text | ToolCalls, record: RequestRecord,
                   measured: Measured) -> Text | ToolCalls:
        """``reply`` reporting the measured input and cached tokens."""
        input_tokens = measured.tokens
        if record.vendor == "anthropic":  # Anthropic's input_tokens leaves the cache reads out
            input_tokens -= measured.cached
        usage = Usage(input_tokens=input_tokens, output_tokens=reply.usage.output_tokens,
                      cached_tokens=measured.cached)
        return replace(reply, usage=usage)

    # --- what tests read ------------------------------------------------------------------

    def accepted(self) -> list[Measured]:
        return [m for m in self.measured if not m.rejected]

    def input_tokens(self) -> int:
        return sum(m.tokens for m in self.accepted())

    def cached_tokens(self) -> int:
        return sum(m.cached for m in self.accepted())
