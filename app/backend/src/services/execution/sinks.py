"""Small event sinks: in memory (tests, summaries) and fan-out to several sinks."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

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


class JsonlFileSink:
    """Appends every event as one JSON line to a file (flushed per event)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._seq = 0

    def emit(self, event: AgentEvent) -> None:
        self._seq += 1
        line = json.dumps({"seq": self._seq, "kind": event.kind.value,
                           "execution_id": event.execution_id, "cycle": event.cycle,
                           "data": event.data}, default=str)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
