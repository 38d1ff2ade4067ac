"""Small event sinks: in memory (tests, summaries) and fan-out to several sinks."""

from __future__ import annotations

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

