"""The ``codex`` adapter: OpenAI's Responses API (default) or Chat Completions (compatible servers).

It keeps the ``openai`` SDK's client (auth header, ``OPENAI_BASE_URL``, timeouts, connection pool,
error classes) but not its typed request path: ``responses.create`` spends most of its time in
``maybe_transform`` walking the whole typed history on every turn. Here each neutral message is
converted to wire JSON once (:class:`~services.execution.providers.common.WireCache`), the tool
list once per run, and the body bytes are assembled by joining cached fragments and sent with the
client's low-level ``post(..., content=...)``; the answer comes back as plain JSON. The SDK's own
retries are off (``max_retries=0``): the loop retries.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import openai
from openai.types.responses import response_create_params

from services.execution.errors import ConfigError, ProviderError
from services.execution.messages import Message, ModelRequest, ModelResponse, ToolSchema
from services.execution.providers import codex_wire, failures
from services.execution.providers.common import KeyedCache, WireCache, dumps, join_json_array

Mode = Literal["responses", "chat"]
# Whether the installed SDK knows the Responses API's ``prompt_cache_key`` (openai >= 1.99): a
# stable key per execution routes its requests to the same prompt cache.
PROMPT_CACHE_KEY = "prompt_cache_key" in getattr(
    response_create_params.ResponseCreateParamsBase, "__annotations__", {})
PROVIDER = "codex"
_REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")


class CodexClient:
    """A :class:`~services.execution.ports.ModelClient` over the ``openai`` SDK."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        mode: Mode = "responses",
        timeout_s: float = 300.0,
        max_output_tokens: int | None = None,
        reasoning_effort: str | None = None,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        if mode not in ("responses", "chat"):
            raise ConfigError(f"codex mode must be 'responses' or 'chat', not {mode!r}")
        self.model = model
        self.mode: Mode = mode
        self._api_key = api_key
        self._max_output_tokens = max_output_tokens
        self._reasoning_effort = reasoning_effort
        try:
            # base_url=None lets the SDK read OPENAI_BASE_URL (then its default host)
            self._client = client or openai.AsyncOpenAI(
                api_key=api_key, base_url=base_url or None, max_retries=0, timeout=timeout_s
            )
        except openai.OpenAIError as exc:
            raise ConfigError(f"codex: cannot build the OpenAI client: {exc}") from exc
        build = codex_wire.responses_items if mode == "responses" else codex_wire.chat_messages
        self._messages: WireCache[bytes] = WireCache(lambda m: _fragments(build(m)))
        tools_builder = codex_wire.responses_tools if mode == "responses" else codex_wire.chat_tools
        self._tools: KeyedCache[bytes] = KeyedCache(lambda ts: dumps(tools_builder(ts)))

    @property
    def base_url(self) -> str:
        return str(self._client.base_url)

    @property
    def wire_conversions(self) -> int:
        """How many neutral messages were converted to wire JSON so far (one per new message)."""
        return self._messages.builds

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.mode == "responses":
            path, body = "/responses", self._responses_body(request)
        else:
            path, body = "/chat/completions", self._chat_body(request)
        data = await self._post(path, body)
        tools = {t.name: t for t in request.tools}
        parse = codex_wire.parse_responses if self.mode == "responses" else codex_wire.parse_chat
        message, usage, stop = parse(data, tools, request.cycle)
        return ModelResponse(
            message=message, usage=usage, model=str(data.get("model") or self.model),
            stop_reason=stop, response_id=data.get("id"),
        )

    async def aclose(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------ bodies

    def _responses_body(self, request: ModelRequest) -> bytes:
        head: dict[str, Any] = {"model": self.model, "instructions": request.system,
                                "store": False}
        if request.tools:
            head.update(tool_choice="auto", parallel_tool_calls=True)
        if self._max_output_tokens is not None:
            head["max_output_tokens"] = self._max_output_tokens
        if request.cache_key and PROMPT_CACHE_KEY:
            head["prompt_cache_key"] = request.cache_key
        if self.model.startswith(_REASONING_PREFIXES):
            head["include"] = ["reasoning.encrypted_content"]
            if self._reasoning_effort:
                head["reasoning"] = {"effort": self._reasoning_effort}
        return self._assemble(head, "input", request.messages, request.tools)

    def _chat_body(self, request: ModelRequest) -> bytes:
        head: dict[str, Any] = {"model": self.model}
        if request.tools:
            head.update(tool_choice="auto", parallel_tool_calls=True)
        if self._max_output_tokens is not None:
            head["max_completion_tokens"] = self._max_output_tokens
        if self._reasoning_effort:
            head["reasoning_effort"] = self._reasoning_effort
        system = dumps({"role": "system", "content": request.system}) if request.system else b""
        return self._assemble(head, "messages", request.messages, request.tools, first=system)

    def _assemble(
        self, head: dict[str, Any], key: str, messages: list[Message], tools: list[ToolSchema],
        *, first: bytes = b"",
    ) -> bytes:
        fragments = [first, *self._messages.render(messages)]
        parts = [dumps(head)[:-1], b',"', key.encode(), b'":', join_json_array(fragments)]
        if tools:
            parts += [b',"tools":', self._tools.get(tools)]
        parts.append(b"}")
        return b"".join(parts)

    # ------------------------------------------------------------ transport

    async def _post(self, path: str, body: bytes) -> dict[str, Any]:
        try:
            data = await self._client.post(path, cast_to=object, content=body)
        except openai.APIStatusError as exc:
            raise self._status_error(exc) from exc
        except openai.APITimeoutError as exc:
            raise failures.unavailable(PROVIDER, "timeout", str(exc)) from exc
        except openai.APIConnectionError as exc:
            raise failures.unavailable(PROVIDER, "connection error", str(exc)) from exc
        except (openai.APIResponseValidationError, json.JSONDecodeError) as exc:
            raise failures.unavailable(PROVIDER, "unreadable answer", str(exc)) from exc
        if not isinstance(data, dict):
            raise failures.unavailable(PROVIDER, "unreadable answer", type(data).__name__)
        return data

    def _status_error(self, exc: openai.APIStatusError) -> ProviderError:
        return failures.from_status(
            PROVIDER, exc.status_code, _error_message(exc), headers=exc.response.headers,
            secrets=(self._api_key, self._client.api_key),
            extra={"request_id": exc.request_id} if exc.request_id else None,
        )


def _fragments(items: list[dict[str, Any]]) -> bytes:
    """Items joined as the inside of a JSON array (no brackets), ready to splice."""
    return b",".join(dumps(item) for item in items)


def _error_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return exc.message
