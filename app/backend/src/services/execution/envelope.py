"""The structured envelope every tool call answers with (SPEC section 2).

Success::

    {ok: true, call_id, tool_name, domain, operation, result, duration_ms,
     request_id, correlation_id}

Error::

    {ok: false, call_id, tool_name, domain, operation, duration_ms,
     error: {code, message, details, retryable, request_id, correlation_id}}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from services.execution.errors import ErrorCode


class EnvelopeError(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: ErrorCode
    message: str
    details: dict[str, Any] = Field(default_factory=dict)
    retryable: bool = False
    request_id: str
    correlation_id: str


class SuccessEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: Literal[True] = True
    call_id: str
    tool_name: str
    domain: str
    operation: str
    result: dict[str, Any]
    duration_ms: float
    request_id: str
    correlation_id: str


class ErrorEnvelope(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ok: Literal[False] = False
    call_id: str
    tool_name: str
    domain: str
    operation: str
    duration_ms: float
    error: EnvelopeError


Envelope = SuccessEnvelope | ErrorEnvelope

_ENVELOPE_ADAPTER: TypeAdapter[Envelope] = TypeAdapter(Envelope)


def envelope_to_json(envelope: Envelope) -> dict[str, Any]:
    """The envelope as plain JSON data (what providers, the journal and the CLI see)."""
    return envelope.model_dump(mode="json")


def envelope_from_json(data: dict[str, Any]) -> Envelope:
    """Parse an envelope recorded earlier (the idempotency store, the journal)."""
    return _ENVELOPE_ADAPTER.validate_python(data)
