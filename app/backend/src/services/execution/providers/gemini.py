"""The ``gemini`` adapter: ``generateContent`` with function declarations, over ``google-genai``.

It keeps the SDK's client (``x-goog-api-key`` auth, ``GOOGLE_GEMINI_BASE_URL``, API version,
timeouts, connection pool, ``errors.APIError``) but not ``models.generate_content``, whose typed
``Content`` conversion grows with the history on every turn. Each neutral message is converted to
wire JSON once (:class:`~services.execution.providers.common.WireCache`), the declarations once
per run, and the plain request dict goes through the SDK's own request path
(``api_client.async_request``, the call ``generate_content`` ends in). Automatic function calling
is an SDK-side feature of ``generate_content`` and so never runs; the tool config says ``AUTO``.
Retries are off (``HttpRetryOptions(attempts=1)``): the loop retries.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from services.execution.errors import ConfigError, ProviderError
from services.execution.messages import ModelRequest, ModelResponse, ToolSchema
from services.execution.providers import failures, gemini_wire
from services.execution.providers.cloud_clients import VertexTarget
from services.execution.providers.common import KeyedCache, WireCache

PROVIDER = "gemini"


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
        self._contents: WireCache[dict[str, Any] | None] = WireCache(gemini_wire.content)
        self._tools: KeyedCache[list[dict[str, Any]]] = KeyedCache(
            gemini_wire.function_declarations
        )

    @property
    def base_url(self) -> str:
        return str(self._client._api_client._http_options.base_url)

    @property
    def wire_conversions(self) -> int:
        """How many neutral messages were converted to wire JSON so far (one per new message)."""
        return self._contents.builds

    async def complete(self, request: ModelRequest) -> ModelResponse:
        data = await self._post(self._body(request))
        tools = {t.name: t for t in request.tools}
        message, usage, stop = gemini_wire.parse(data, tools, request.cycle)
        return ModelResponse(
            message=message, usage=usage, model=str(data.get("modelVersion") or self.model),
            stop_reason=stop, response_id=data.get("responseId"),
        )

    async def aclose(self) -> None:
        await self._client.aio.aclose()

    def _body(self, request: ModelRequest) -> dict[str, Any]:
        contents = [c for c in self._contents.render(request.messages) if c is not None]
        body: dict[str, Any] = {"contents": contents}
        if request.system:
            body["systemInstruction"] = {"parts": [{"text": request.system}]}
        if request.tools:
            body["tools"] = self._declarations(request.tools)
            body["toolConfig"] = {"functionCallingConfig": {"mode": "AUTO"}}
        if self._generation:
            body["generationConfig"] = self._generation
        return body

    def _declarations(self, tools: list[ToolSchema]) -> list[dict[str, Any]]:
        return self._tools.get(tools)

    async def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        path = f"{self._model_path}:generateContent"
        api = self._client.aio._api_client
        try:
            response = await api.async_request("post", path, body, None)
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
