"""The one dispatcher: normalize a call, validate its arguments, run the handler, answer.

Every outcome is an envelope; nothing a model sends can make :meth:`Dispatcher.dispatch` raise.
A call keyed ``(execution_id, call_id)`` that was dispatched before answers with the recorded
envelope, without running its handler again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from services.execution.envelope import (
    Envelope,
    EnvelopeError,
    ErrorEnvelope,
    SuccessEnvelope,
    envelope_from_json,
    envelope_to_json,
)
from services.execution.errors import ErrorCode, RunEndingError, ToolFailure
from services.execution.messages import ToolCall, provider_tool_name, split_tool_name
from services.execution.ports import IdempotencyStore
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.spec import ToolSpec

log = logging.getLogger(__name__)


class ToolRegistry:
    """Operations by provider-facing name (``git_status``) and dotted name (``git.status``)."""

    def __init__(self, specs: Iterable[ToolSpec] = (), withheld: Iterable[str] = ()) -> None:
        self._by_name: dict[str, ToolSpec] = {}
        # operations that exist but are not offered (a role's policy): ``tool_not_allowed``
        self.withheld = frozenset(withheld)
        for spec in specs:
            self.add(spec)

    def add(self, spec: ToolSpec) -> None:
        if spec.name in self._by_name:
            raise ValueError(f"duplicate tool {spec.name}")
        self._by_name[spec.name] = spec

    def get(self, name: str) -> ToolSpec | None:
        return self._by_name.get(name) or self._by_name.get(provider_tool_name(name))

    def specs(self) -> list[ToolSpec]:
        return list(self._by_name.values())

    def __len__(self) -> int:
        return len(self._by_name)


class InMemoryIdempotencyStore:
    """Recorded envelopes for one process (the database-backed store replaces it in production)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[tuple[str, str], dict[str, Any]] = {}

    def get(self, execution_id: str, call_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self._records.get((execution_id, call_id))

    def put(self, execution_id: str, call_id: str, envelope: dict[str, Any]) -> None:
        with self._lock:
            self._records.setdefault((execution_id, call_id), envelope)


class Dispatcher:
    """Runs normalized tool calls against a registry, with idempotency."""

    def __init__(self, registry: ToolRegistry, store: IdempotencyStore | None = None) -> None:
        self.registry = registry
        self.store: IdempotencyStore = store if store is not None else InMemoryIdempotencyStore()

    def normalize(self, call_id: str, name: str, args: dict[str, Any] | None) -> ToolCall:
        """The normalized call for a provider's ``(id, name, arguments)``."""
        spec = self.registry.get(name)
        if spec is not None:
            return ToolCall(call_id=call_id, tool_name=spec.name, domain=spec.domain,
                            operation=spec.operation, args=dict(args or {}))
        domain, operation = split_tool_name(name)
        return ToolCall(call_id=call_id, tool_name=provider_tool_name(name), domain=domain,
                        operation=operation, args=dict(args or {}))

    def dispatch(self, call: ToolCall, ctx: ToolDomainContext) -> Envelope:
        recorded = self.store.get(ctx.execution_id, call.call_id)
        if recorded is not None:
            return envelope_from_json(recorded)
        envelope = self._run(call, ctx)
        self.store.put(ctx.execution_id, call.call_id, envelope_to_json(envelope))
        return envelope

    def _run(self, call: ToolCall, ctx: ToolDomainContext) -> Envelope:
        started = time.perf_counter()
        spec = self.registry.get(call.tool_name)
        try:
            if spec is None and provider_tool_name(call.tool_name) in self.registry.withheld:
                raise ToolFailure(ErrorCode.TOOL_NOT_ALLOWED,
                                  f"{call.tool_name!r} is not allowed in this execution",
                                  details={"tool_name": call.tool_name})
            if spec is None:
                raise ToolFailure(ErrorCode.UNKNOWN_TOOL, f"unknown tool {call.tool_name!r}",
                                  details={"tool_name": call.tool_name})
            args = _validate(spec, call.args)
            result = spec.handler(args, ctx)
        except ToolFailure as failure:
            return error_envelope(call, ctx, failure, started)
        except RunEndingError:  # the run's error, not the call's (a crashed MCP server)
            raise
        except Exception as exc:  # a handler bug must not end the run; it is reported, not hidden
            log.exception("tool handler %s failed", call.tool_name)
            internal = ToolFailure(ErrorCode.INTERNAL_ERROR,
                                   f"internal error: {type(exc).__name__}")
            return error_envelope(call, ctx, internal, started)
        return SuccessEnvelope(
            call_id=call.call_id, tool_name=call.tool_name, domain=call.domain,
            operation=call.operation, result=result, duration_ms=_elapsed_ms(started),
            request_id=ctx.request_id, correlation_id=ctx.correlation_id,
        )


def _validate(spec: ToolSpec, args: dict[str, Any]) -> Any:
    try:
        return spec.args_model.model_validate(args)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(p) for p in err["loc"]), "problem": err["msg"]}
            for err in exc.errors(include_url=False, include_input=False)
        ]
        raise ToolFailure(ErrorCode.INVALID_ARGUMENTS,
                          f"invalid arguments for {spec.dotted_name}",
                          details={"errors": problems}) from None


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def error_envelope(call: ToolCall, ctx: ToolDomainContext, failure: ToolFailure,
                   started: float | None = None) -> ErrorEnvelope:
    """The error envelope for ``failure`` (all six error fields always present)."""
    duration = _elapsed_ms(started) if started is not None else 0.0
    return ErrorEnvelope(
        call_id=call.call_id, tool_name=call.tool_name, domain=call.domain,
        operation=call.operation, duration_ms=duration,
        error=EnvelopeError(code=failure.code, message=failure.message, details=failure.details,
                            retryable=failure.retryable, request_id=ctx.request_id,
                            correlation_id=ctx.correlation_id),
    )
