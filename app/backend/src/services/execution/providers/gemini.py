"""The ``gemini`` adapter: ``generateContent`` with function declarations, over ``google-genai``.

It keeps the SDK's client (``x-goog-api-key`` auth, ``GOOGLE_GEMINI_BASE_URL``, API version,
timeouts, connection pool, ``errors.APIError``) but not ``models.generate_content``, whose typed
``Content`` conversion grows with the history on every turn. Each neutral message is converted to
wire JSON once (:class:`~services.execution.providers.common.WireCache`), the declarations once
per run, and the request goes through the SDK's own request path (``api_client.async_request``,
the call ``generate_content`` ends in). Automatic function calling is an SDK-side feature of
``generate_content`` and so never runs; the tool config says ``AUTO``. Retries are off
(``HttpRetryOptions(attempts=1)``): the loop retries.

The body is sent as bytes, assembled from each message's JSON text (made once, when the message
is converted) and the declarations' (once per run): the SDK would ``json.dumps`` the whole request
dict on every turn, a cost that grows with the history (about 1 ms a turn at 50 turns). The bytes
are those ``json.dumps`` makes of the request dict (its separators, ASCII escapes, key order;
``tests/unit/execution/providers/test_gemini_body.py`` compares them); they go through the steps
of ``async_request`` (``_build_request`` with an empty dict, its ``data`` replaced by the bytes,
which the SDK's transport sends as they are, then ``_async_request``, or, with retries off, the
one attempt its retrier would make, ``_async_request_once``). When the SDK would add to the body
itself (``HttpOptions.extra_body``), the dict goes through ``async_request`` as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from services.execution.errors import ConfigError, ProviderError
from services.execution.messages import Message, ModelRequest, ModelResponse, ToolSchema
from services.execution.providers import failures, gemini_wire
from services.execution.providers.cloud_clients import VertexTarget
from services.execution.providers.common import KeyedCache, WireCache

PROVIDER = "gemini"
_TOOL_CONFIG = {"functionCallingConfig": {"mode": "AUTO"}}


class GeminiClient:
    """A :class:`~services.execution.ports.ModelClient` over ``google-genai``."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        max_output_tokens: int | None = None,
        thinking_budget: int | None = None,
        client: genai.Client | None = None,
        vertex: VertexTarget | None = None,
    ) -> None:
        self.model = model.removeprefix("models/")
        # Vertex AI names a model under its publisher (the SDK adds projects/.../locations/...).
        self._model_path = f"publishers/google/models/{self.model}" if vertex else (
            f"models/{self.model}")
        self._api_key = api_key
        self._generation: dict[str, Any] = {}
        if max_output_tokens is not None:
            self._generation["maxOutputTokens"] = max_output_tokens
        if thinking_budget is not None:
            self._generation["thinkingConfig"] = {"thinkingBudget": thinking_budget}
        options = genai_types.HttpOptions(
            # None: the SDK reads GOOGLE_GEMINI_BASE_URL (GOOGLE_VERTEX_BASE_URL on Vertex AI)
            base_url=base_url or (vertex.base_url if vertex else None),
            timeout=int(timeout_s * 1000),
            retry_options=genai_types.HttpRetryOptions(attempts=1),
            # An explicit httpx2 transport: without it the SDK switches to aiohttp whenever
            # aiohttp happens to be installed (the kubernetes client brings it), and its
            # errors and timeouts differ.
            async_client_args={"transport": httpx2.AsyncHTTPTransport()},
        )
        try:
            if client is None and vertex is not None:
                client = genai.Client(vertexai=True, project=vertex.project,
                                      location=vertex.location, credentials=vertex.credentials,
                                      http_options=options)
            self._client = client or genai.Client(api_key=api_key, http_options=options)
        except ValueError as exc:  # no key found, conflicting options
            raise ConfigError(f"gemini: cannot build the client: {exc}") from exc
        self._contents: WireCache[str | None] = WireCache(_content_json)
        self._tools: KeyedCache[str] = KeyedCache(
            lambda tools: json.dumps(gemini_wire.function_declarations(tools)))

    @property
    def base_url(self) -> str:
        return str(self._client._api_client._http_options.base_url)

    @property
    def wire_conversions(self) -> int:
        """How many neutral messages were converted to wire JSON so far (one per new message)."""
        return self._contents.builds

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data = await self._post(self._body_bytes(request), lambda: self._body(request))
        tools = {t.name: t for t in request.tools}
        message, usage, stop = gemini_wire.parse(data, tools, request.cycle)
        return ModelResponse(
            message=message, usage=usage, model=str(data.get("modelVersion") or self.model),
            stop_reason=stop, response_id=data.get("responseId"),
        )

    async def aclose(self) -> None:
        await self._client.aio.aclose()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        """The request as a dict (what :meth:`_body_bytes` encodes)."""
        contents = [c for c in map(gemini_wire.content, request.messages) if c is not None]
        body: dict[str, Any] = {"contents": contents}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        if request.tools:
            body["tools"] = gemini_wire.function_declarations(request.tools)
            body["toolConfig"] = _TOOL_CONFIG
        if self._generation:
            body["generationConfig"] = self._generation
        return body

    def _body_bytes(self, request: ModelRequest) -> bytes:
        """``json.dumps(self._body(request))``, from the cached JSON of each message."""
        contents = [c for c in self._contents.render(request.messages) if c is not None]
        parts = ['{"contents": [', ", ".join(contents), "]"]
        if request.system:
            parts += [', "systemInstruction": ', json.dumps({"parts": [{"text": request.system}]})]
        if request.tools:
            parts += [', "tools": ', self._declarations(request.tools),
                      ', "toolConfig": ', json.dumps(_TOOL_CONFIG)]
        if self._generation:
            parts += [', "generationConfig": ', json.dumps(self._generation)]
        parts.append("}")
        return "".join(parts).encode("utf-8")

    def _declarations(self, tools: list[ToolSchema]) -> str:
        return self._tools.get(tools)

    async def _post(self, body: bytes, as_dict: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        path = f"{self._model_path}:generateContent"
        api = self._client.aio._api_client
        try:
            response = await _send(api, path, body, as_dict)
        except genai_errors.APIError as exc:
            raise self._status_error(exc) from exc
        except httpx2.TimeoutException as exc:
            raise failures.unavailable(PROVIDER, "timeout", str(exc)) from exc
        except httpx2.TransportError as exc:
            raise failures.unavailable(PROVIDER, "connection error", str(exc)) from exc
        try:
            data = json.loads(response.body or "{}")
        except json.JSONDecodeError as exc:
            raise failures.unavailable(PROVIDER, "unreadable answer", str(exc)) from exc
        if not isinstance(data, dict):
            raise failures.unavailable(PROVIDER, "unreadable answer", type(data).__name__)
        return data

    def _status_error(self, exc: genai_errors.APIError) -> ProviderError:
        headers = getattr(exc.response, "headers", None)
        message = exc.message or exc.status or "error"
        extra = {"status_text": exc.status} if exc.status else None
        return failures.from_status(
            PROVIDER, int(exc.code or 0), str(message), headers=headers,
            secrets=(self._api_key, self._client._api_client.api_key), extra=extra,
        )


def _content_json(message: Message) -> str | None:
    """The JSON text of a message's ``Content`` (``None``: nothing to send)."""
    content = gemini_wire.content(message)
    return json.dumps(content) if content is not None else None


async def _send(api: Any, path: str, body: bytes,
                as_dict: Callable[[], dict[str, Any]]) -> Any:
    """What ``api.async_request("post", path, as_dict())`` does, with ``body`` as the request's
    data (the SDK sends bytes as they are); ``as_dict()`` through ``async_request`` itself
    when the SDK adds to the body (``extra_body``)."""
    request = api._build_request("post", path, {}, None)
    if request.data:  # the SDK's own additions: let it merge and encode them
        return await api.async_request("post", path, as_dict(), None)
    request.data = body
    retry = api._http_options.retry_options
    if retry is not None and retry.attempts == 1:
        # what the SDK's retrier (tenacity: stop after one attempt, reraise) does: one call,
        # its answer or its exception as it is, without the retrier's own work per request
        result = await api._async_request_once(request, False)
    else:
        result = await api._async_request(http_request=request, http_options=None, stream=False)
    answer = result.response_stream[0] if result.response_stream else ""
    return genai_types.HttpResponse(headers=result.headers, body=answer)
