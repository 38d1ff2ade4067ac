"""The tool runner the loop and the tool gateway share: dispatch, loop detection, events.

FrontierAgent runs a turn-based provider's tool calls through it; the tool gateway of a
self-driving provider (claude) runs the calls of the provider's own loop through the same
runner. Neither knows the other: each holds a :class:`ToolRunner`, and a call's result is a
value (:class:`ToolStep`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import anyio

from services.execution.approvals import ApprovalGate, GateAction, GateVerdict, PauseRun
from services.execution.envelope import envelope_to_json
from services.execution.errors import ErrorCode, ToolFailure
from services.execution.guards import LoopDetector, LoopVerdict
from services.execution.messages import ToolCall
from services.execution.outcomes import StopRun
from services.execution.ports import AgentEvent, AgentEventKind, EventSink
from services.execution.spans import ContentFilter, record_tool, tool_attributes
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, error_envelope
from services.telemetry import record, tracing


@dataclass(frozen=True)
class ToolStep:
    """One dispatched call: its envelope, a warning for the model, the stop it calls for."""

    envelope: dict[str, Any]
    warning: str | None = None
    stop: StopRun | None = None


@dataclass
class ToolRunner:
    """Dispatches calls with their events and loop detection, for one execution.

    ``inline``: a turn-based loop has nothing else to run while a tool works, so it dispatches
    in place; a self-driving engine's session (its CLI transport) shares the event loop, so its
    calls run in a worker thread.
    """

    dispatcher: Dispatcher
    ctx: ToolDomainContext
    sink: EventSink
    loops: LoopDetector
    provider: str
    inline: bool
    content: ContentFilter | None = None  # tool arguments and results in spans (see spans)
    gate: ApprovalGate | None = None  # the approval policy (services.execution.approvals)

    def emit(self, kind: AgentEventKind, cycle: int, data: dict[str, Any]) -> None:
        self.sink.emit(AgentEvent(kind=kind, execution_id=self.ctx.execution_id, cycle=cycle,
                                  data=data))

    def warn(self, code: str, message: str, cycle: int = 0) -> None:
        self.emit(AgentEventKind.WARNING, cycle, {"code": code, "message": message})

    def normalize(self, call_id: str, name: str, args: dict[str, Any]) -> ToolCall:
        """A provider's raw call as a neutral :class:`ToolCall`."""
        return self.dispatcher.normalize(call_id, name, args)

    async def run(self, call: ToolCall, cycle: int) -> ToolStep:
        """Dispatch one call; a repeated outcome adds a warning, or the stop of the run.

        The approval gate comes first: a denied call is answered ``permission_denied`` without
        running; a call that needs an approval raises :class:`PauseRun` (journalled
        ``approval_requested``)."""
        gate_verdict = self.gate.review(call) if self.gate is not None else None
        if gate_verdict is not None and gate_verdict.action is GateAction.PAUSE:
            self.emit(AgentEventKind.APPROVAL_REQUESTED, cycle, {
                "call": call.model_dump(mode="json"), **(gate_verdict.evidence or {})})
            raise PauseRun(gate_verdict.approval_id or "", call)
        self.emit(AgentEventKind.TOOL_CALL, cycle, {"call": call.model_dump(mode="json")})
        started = time.monotonic()
        with tracing.span(f"execute_tool {call.tool_name}",
                          tool_attributes(self.ctx, call, cycle)) as span:
            if gate_verdict is not None and gate_verdict.action is GateAction.DENY:
                envelope = self._denied(call, cycle, gate_verdict)
            elif self.inline:
                envelope = envelope_to_json(self.dispatcher.dispatch(call, self.ctx))
            else:
                envelope = envelope_to_json(await anyio.to_thread.run_sync(
                    self.dispatcher.dispatch, call, self.ctx))
            result = record_tool(span, call, envelope, self.content)
        record.tool_call(call.domain, call.operation, result, time.monotonic() - started)
        data: dict[str, Any] = {"call": call.model_dump(mode="json"), "envelope": envelope,
                                "provider": self.provider}
        if gate_verdict is not None and gate_verdict.evidence is not None:
            data["approval"] = gate_verdict.evidence
        self.emit(AgentEventKind.TOOL_RESULT, cycle, data)
        verdict, count = self.loops.observe(call, envelope)
        if verdict is LoopVerdict.STOP:
            return ToolStep(envelope, stop=StopRun(
                ErrorCode.LOOP_DETECTED,
                f"{call.tool_name} repeated {count} times with the same outcome"))
        if verdict is LoopVerdict.WARN:
            text = (f"Warning: you called {call.tool_name} with the same arguments {count} times "
                    "and got the same outcome each time. Change your approach; at "
                    f"{self.loops.stop_at} repetitions the run stops.")
            self.warn("loop_warning", text, cycle)
            return ToolStep(envelope, warning=text)
        return ToolStep(envelope)

    def _denied(self, call: ToolCall, cycle: int, verdict: GateVerdict) -> dict[str, Any]:
        """The ``permission_denied`` envelope of a call the gate refused (it never ran); a
        refusal by the policy itself is journalled as an ``approval_decided`` event."""
        evidence = dict(verdict.evidence or {})
        if evidence.get("decided_by") == "policy":
            self.emit(AgentEventKind.APPROVAL_DECIDED, cycle, {
                "call_id": call.call_id, "tool": f"{call.domain}.{call.operation}", **evidence})
        details = {k: evidence[k] for k in ("rule", "approval_id", "decided_by", "reason")
                   if evidence.get(k) is not None}
        failure = ToolFailure(ErrorCode.PERMISSION_DENIED, verdict.message
                              or "the call was not approved", details=details)
        return envelope_to_json(error_envelope(call, self.ctx, failure))
