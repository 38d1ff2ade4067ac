"""Small event sinks: in memory (tests, summaries) and fan-out to several sinks."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from services.execution.ports import AgentEvent, AgentEventKind, EventSink


class MemorySink:
    """Keeps every event in order."""

    def __init__(self) -> None:
        self.events: list[AgentEvent] = []

    def emit(self, event: AgentEvent) -> None:
        self.events.append(event)

    def of_kind(self, kind: AgentEventKind) -> list[AgentEvent]:
        return [e for e in self.events if e.kind is kind]


class FanOutSink:
    """Hands every event to each sink in turn (the journal first, so it is durable before shown)."""

    def __init__(self, sinks: Iterable[EventSink]) -> None:
        self.sinks = list(sinks)

    def emit(self, event: AgentEvent) -> None:
        for sink in self.sinks:
            sink.emit(event)



TOOL_CALL_LOGGER = "studio.tool_calls"


class LogSink:
    """One structured log record per tool-call cycle (SPEC §7): provider, tool_name, operation,
    call_id, request_id, correlation_id, cycle, the outcome and the duration."""

    def __init__(self, provider: str, request_id: str, correlation_id: str) -> None:
        self.log = logging.getLogger(TOOL_CALL_LOGGER)
        self.fields = {"provider": provider, "request_id": request_id,
                       "correlation_id": correlation_id}

    def emit(self, event: AgentEvent) -> None:
        if event.kind is not AgentEventKind.TOOL_RESULT or not self.log.isEnabledFor(
                logging.INFO):
            return
        call = event.data.get("call") or {}
        envelope = event.data.get("envelope") or {}
        error = envelope.get("error") or {}
        self.log.info("tool call %s", call.get("tool_name"), extra={"studio": {
            **self.fields, "execution_id": event.execution_id, "cycle": event.cycle,
            "tool_name": call.get("tool_name"), "operation": call.get("operation"),
            "call_id": call.get("call_id"), "ok": envelope.get("ok"),
            "error_code": error.get("code"), "duration_ms": envelope.get("duration_ms"),
        }})
