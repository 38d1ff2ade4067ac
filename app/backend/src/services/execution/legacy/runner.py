"""The harness around an agent CLI: its stream into the journal, the guards, one RunResult.

Per line of the CLI's output (:meth:`CliAdapter.parse`):

- a model turn -> ``model_response`` (text and the CLI's tool calls), its usage priced and
  charged (``usage`` event), ``tool_call`` for each call (the CLI's own tool name, mapped to the
  nearest domain);
- a tool's output -> an envelope recorded like any tool call (the store checkpoints the
  workspace after a call that may have changed it) and a ``tool_result`` event;
- the session's end -> the final answer parsed into :class:`AgentResult`.

Between lines, every ``poll_s``: the wall clock and the stall limit (no output for ``stall_s``);
every ``control_every_s``, the run control (kill switch, cancellation); after each model turn,
the run control, max turns and both budgets. A stop
kills the CLI's process group. A CLI that exits without its session's end, or prints lines that
are not its stream format, ends with ``legacy_cli_failed`` and its stderr tail as evidence.
"""

from __future__ import annotations

import queue
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from services.execution.errors import ErrorCode, ExecutionError
from services.execution.guards import AgentLimits
from services.execution.legacy.cli import (
    CliAdapter,
    CliRequest,
    CliToolCall,
    ModelTurn,
    SessionEnd,
    ToolOutput,
    UsageReport,
    domain_of,
)
from services.execution.legacy.keyproxy import KeyProxy
from services.execution.legacy.netlimit import limited
from services.execution.legacy.process import CliProcess, confine, home_inside
from services.execution.legacy.relay import RELAY_ORIGIN, RELAY_PORT, relayed
from services.execution.messages import AgentResult, AgentStatus, Usage
from services.execution.outcomes import OUTCOME_FOR_CODE, Outcome, RunResult, StopRun, UsageTotals
from services.execution.ports import (
    AgentEvent,
    AgentEventKind,
    BudgetPort,
    CommandSandbox,
    EventSink,
    IdempotencyStore,
    RunControl,
    budget_refusal,
)
from services.execution.pricing import PriceTable, UsageAccumulator
from services.execution.prompts import parse_agent_result
from services.execution.tool_domains.context import ToolDomainContext

RUNTIME = "legacy"
OUTPUT_CAP = 64 * 1024
GARBAGE_SAMPLE = 512

#: How the CLI's own end of session maps to our stops.
SUBTYPE_CODES: dict[str, ErrorCode] = {
    "error_max_turns": ErrorCode.MAX_ITERATIONS_EXCEEDED,
    "error_max_budget_usd": ErrorCode.BUDGET_EXCEEDED,
}


@dataclass
class LegacyDeps:
    """What the harness needs, given by the composition root."""

    ctx: ToolDomainContext
    sink: EventSink
    store: IdempotencyStore
    limits: AgentLimits = field(default_factory=AgentLimits)
    control: RunControl | None = None
    budget: BudgetPort | None = None
    refresh_limits: Callable[[], AgentLimits] | None = None
    spent: UsageTotals | None = None
    prices: PriceTable = field(default_factory=PriceTable)
    clock: Callable[[], float] = time.monotonic
    poll_s: float = 0.25  # how often the stream is checked for silence and the clocks
    control_every_s: float = 1.0  # how often the run control (a database read) is asked


@dataclass
class _State:
    iterations: int = 0
    seen_messages: set[str] = field(default_factory=set)
    calls: dict[str, tuple[CliToolCall, float]] = field(default_factory=dict)
    last_text: str = ""
    end: SessionEnd | None = None
    garbage: list[str] = field(default_factory=list)


class LegacyRunner:
    """One run of ``cli`` in the workspace of ``deps.ctx``, its state under ``home``."""

    def __init__(self, cli: CliAdapter, model: str, home: Path, deps: LegacyDeps) -> None:
        self.cli = cli
        self.model = model
        self.home = home
        self.deps = deps
        self.usage = UsageAccumulator(deps.prices)
        if deps.spent is not None:
            self.usage.input_tokens = deps.spent.input_tokens
            self.usage.output_tokens = deps.spent.output_tokens
            self.usage.cost_usd = deps.spent.cost_usd
        self.state = _State()
        self.process: CliProcess | None = None
        self.proxy: KeyProxy | None = None

    # -- entry --------------------------------------------------------------------------------
    def run(self, prompt: str) -> RunResult:
        ctx = self.deps.ctx
        self._emit(AgentEventKind.STARTED, {
            "provider": self.cli.provider, "model": self.model, "task": prompt,
            "runtime": RUNTIME, "cli": self.cli.name,
            "sandbox": ctx.sandbox.mode if ctx.sandbox is not None else None,
            "resumed": False, "limits": self.deps.limits.__dict__})
        try:
            self._guards()
            self.process = self._start(prompt)
            try:
                self._pump(self.process)
            finally:
                self.process.kill()
                exit_code = self.process.wait()
            return self._conclude(exit_code)
        except StopRun as stop:
            return self._finish(stop.outcome, code=stop.code, message=stop.message)
        finally:
            if self.proxy is not None:
                self.proxy.close()

    def _start(self, prompt: str) -> CliProcess:
        limits = self.deps.limits
        sandbox = self._sandbox()
        bwrap = sandbox.mode == "bwrap"
        try:
            self.proxy = KeyProxy(self.cli.model_route(), self.cli.environ)
        except ExecutionError as exc:
            raise StopRun(exc.code, exc.message) from None
        except ValueError as exc:
            raise StopRun(ErrorCode.CONFIG_ERROR, f"the model's base URL: {exc}") from None
        channel: socket.socket | None = None
        if bwrap:  # the CLI's connections arrive over a Unix socket from the sandbox's relay
            channel, inner = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            self.proxy.accept_from(channel)
            origin = RELAY_ORIGIN
        else:  # development: the proxy listens on the host's loopback
            origin = self.proxy.listen()
        for name in ("", *self.cli.home_dirs):
            (self.home / name).mkdir(parents=True, exist_ok=True)
        request = CliRequest(prompt=prompt, model=self.model,
                             max_turns=limits.max_iterations,
                             max_budget_usd=max(limits.max_budget_usd - self.usage.cost_usd, 0),
                             home=home_inside(sandbox, self.home),
                             endpoint=self.proxy.base_url(origin), token=self.proxy.token)
        for relative, content in self.cli.home_files(request).items():
            (self.home / relative).parent.mkdir(parents=True, exist_ok=True)
            (self.home / relative).write_text(content, encoding="utf-8")
        workspace = self.deps.ctx.resolved_workspace_root()
        argv = self.cli.argv(request, sandboxed=bwrap)
        if channel is not None:  # its own network: the relay's port is all there is to reach
            fd = inner.detach()
            argv = relayed(limited(argv, [RELAY_PORT]), fd)
        prepared = confine(sandbox, argv, self.cli.env(request), workspace=workspace,
                           home=self.home, readable=self.cli.readable(),
                           hidden=self.cli.hidden)
        if channel is not None:
            prepared = replace(prepared, pass_fds=(*prepared.pass_fds, fd))
        return CliProcess(prepared)

    def _sandbox(self) -> CommandSandbox:
        sandbox = self.deps.ctx.sandbox
        if sandbox is None:
            raise StopRun(ErrorCode.SANDBOX_UNAVAILABLE,
                          "the legacy runtime needs the execution's command sandbox")
        return sandbox

    # -- the stream ---------------------------------------------------------------------------
    def _pump(self, process: CliProcess) -> None:
        started = self.deps.clock()
        last_output = last_control = started
        while True:
            try:
                line = process.next_line(self.deps.poll_s)
            except queue.Empty:
                line = ""
            else:
                if line is None:
                    return
                last_output = self.deps.clock()
            if line.strip():
                self._line(line)
            now = self.deps.clock()
            if now - last_control >= self.deps.control_every_s:
                last_control = now
                self._check_control()
            if now - started >= self.deps.limits.wall_clock_s:
                raise StopRun(ErrorCode.STALLED, "wall-clock limit reached")
            if now - last_output >= self.deps.limits.stall_s:
                raise StopRun(ErrorCode.STALLED,
                              f"no output from the CLI within {self.deps.limits.stall_s:.0f}s")

    def _line(self, line: str) -> None:
        try:
            items = self.cli.parse(line)
        except (ValueError, TypeError, KeyError, AttributeError):
            self.state.garbage.append(line[:GARBAGE_SAMPLE])
            return
        for item in items:
            if isinstance(item, ModelTurn):
                self._turn(item)
            elif isinstance(item, ToolOutput):
                self._tool_output(item)
            elif isinstance(item, UsageReport):
                self._account(item.usage, item.model)
                self._guards()
            else:
                self.state.end = item

    def _turn(self, turn: ModelTurn) -> None:
        state = self.state
        first = turn.message_id not in state.seen_messages
        state.seen_messages.add(turn.message_id)
        if first:
            state.iterations += 1
        if turn.text:
            state.last_text = turn.text
        self._emit(AgentEventKind.MODEL_RESPONSE, {
            "text": turn.text, "response_id": turn.message_id, "runtime": RUNTIME,
            "tool_calls": [{"call_id": c.call_id, "tool_name": c.name, "args": c.arguments}
                           for c in turn.tool_calls]})
        if first and turn.usage is not None:
            self._account(turn.usage, turn.model)
        for call in turn.tool_calls:
            domain, operation = domain_of(call.name)
            state.calls[call.call_id] = (call, self.deps.clock())
            self._emit(AgentEventKind.TOOL_CALL, {"call": {
                "call_id": call.call_id, "tool_name": call.name, "domain": domain,
                "operation": operation, "args": call.arguments}})
        self._guards()

    def _account(self, usage: Usage, model: str) -> None:
        step = self.usage.add(model or self.model, usage)
        if self.deps.budget is not None and step.cost_usd > 0:
            self.deps.budget.charge(step.cost_usd)
        self._emit(AgentEventKind.USAGE, {
            "delta": {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens,
                      "cost_usd": step.cost_usd},
            "total": self.totals().model_dump(mode="json"),
            "semantic": usage.semantic.value, "model": model or self.model,
            "price": self.deps.prices.describe(model or self.model)})

    def _tool_output(self, output: ToolOutput) -> None:
        call, started = self.state.calls.pop(output.call_id, (
            CliToolCall(output.call_id, "unknown", {}), self.deps.clock()))
        envelope = self._envelope(call, output, started)
        self.deps.store.put(self.deps.ctx.execution_id, output.call_id, envelope)
        domain, operation = domain_of(call.name)
        self._emit(AgentEventKind.TOOL_RESULT, {
            "call": {"call_id": call.call_id, "tool_name": call.name, "domain": domain,
                     "operation": operation, "args": call.arguments},
            "envelope": envelope, "provider": self.cli.provider, "runtime": RUNTIME})

    def _envelope(self, call: CliToolCall, output: ToolOutput, started: float) -> dict[str, Any]:
        domain, operation = domain_of(call.name)
        text = output.output
        if len(text) > OUTPUT_CAP:
            half = OUTPUT_CAP // 2
            text = f"{text[:half]}\n[... {len(text) - OUTPUT_CAP} characters elided ...]\n" \
                   f"{text[-half:]}"
        base = {"call_id": call.call_id, "tool_name": call.name, "domain": domain,
                "operation": operation,
                "duration_ms": round((self.deps.clock() - started) * 1000, 3)}
        if not output.is_error:
            return {"ok": True, **base, "result": {"output": text, "arguments": call.arguments},
                    "request_id": self.deps.ctx.request_id,
                    "correlation_id": self.deps.ctx.correlation_id}
        return {"ok": False, **base, "error": {
            "code": ErrorCode.LEGACY_TOOL_ERROR.value,
            "message": text[:4000], "details": {"arguments": call.arguments},
            "retryable": False, "request_id": self.deps.ctx.request_id,
            "correlation_id": self.deps.ctx.correlation_id}}

    # -- guards -------------------------------------------------------------------------------
    def _check_control(self) -> None:
        code = self.deps.control.check() if self.deps.control is not None else None
        if code is not None:
            raise StopRun(code, f"stopped: {code.value}")

    def _guards(self) -> None:
        self._check_control()
        if self.deps.refresh_limits is not None:
            self.deps.limits = self.deps.refresh_limits()
        limits = self.deps.limits
        if self.state.iterations > limits.max_iterations:
            raise StopRun(ErrorCode.MAX_ITERATIONS_EXCEEDED,
                          f"max_iterations ({limits.max_iterations}) reached")
        if self.usage.cost_usd >= limits.max_budget_usd:
            raise StopRun(ErrorCode.BUDGET_EXCEEDED,
                          f"execution budget ${limits.max_budget_usd:.2f} spent "
                          "(layer: execution)")
        code = self.deps.budget.check() if self.deps.budget is not None else None
        if code is not None:
            raise StopRun(code, budget_refusal(self.deps.budget))

    # -- the end ------------------------------------------------------------------------------
    def _conclude(self, exit_code: int | None) -> RunResult:
        end = self.state.end
        stderr = self._stderr_tail()
        evidence: dict[str, Any] = {"exit_code": exit_code, "stderr_tail": stderr,
                                    "unreadable_lines": self.state.garbage[:5]}
        if end is None:
            reason = ("printed output that is not its stream format" if self.state.garbage
                      else "exited without ending its session")
            last = [ln for ln in stderr.splitlines() if ln.strip()][-1:]
            said = f": {last[0][:300]}" if last else ""
            return self._finish(Outcome.ERROR, code=ErrorCode.LEGACY_CLI_FAILED,
                                message=f"the agent CLI {reason} (exit code {exit_code}){said}",
                                extra=evidence)
        extra = {"cli_subtype": end.subtype, "cli_turns": end.turns,
                 "cli_reported_cost_usd": end.reported_cost_usd}
        if end.subtype in SUBTYPE_CODES:
            code = SUBTYPE_CODES[end.subtype]
            return self._finish(OUTCOME_FOR_CODE[code], code=code,
                                message=f"the CLI stopped: {end.subtype}", extra=extra)
        if end.subtype != "success":
            return self._finish(Outcome.ERROR, code=ErrorCode.LEGACY_CLI_FAILED,
                                message=f"the CLI ended with {end.subtype!r}",
                                extra={**extra, **evidence, **end.details})
        return self._finish(Outcome.FINISHED, final_text=end.final_text or self.state.last_text,
                            extra=extra)

    def _stderr_tail(self) -> str:
        return self.process.stderr_tail() if self.process is not None else ""

    def totals(self) -> UsageTotals:
        return UsageTotals(input_tokens=self.usage.input_tokens,
                           output_tokens=self.usage.output_tokens,
                           cost_usd=round(self.usage.cost_usd, 6))

    def _finish(self, outcome: Outcome, *, final_text: str = "", code: ErrorCode | None = None,
                message: str = "", extra: dict[str, Any] | None = None) -> RunResult:
        if outcome is Outcome.FINISHED:
            result, parsed = parse_agent_result(final_text)
        else:
            result = AgentResult(status=AgentStatus.FAILED, summary=message or final_text)
            parsed = False
        run = RunResult(
            execution_id=self.deps.ctx.execution_id, provider=self.cli.provider,
            model=self.model, outcome=outcome, result=result, usage=self.totals(),
            iterations=self.state.iterations, parsed_result=parsed,
            error={"code": code.value, "message": message} if code is not None else None)
        data = run.summary()
        data.update(parsed_result=parsed, runtime=RUNTIME, **(extra or {}))
        if self.process is not None:  # its process group is gone by now
            data["cli_pid"] = self.process.proc.pid
        self._emit(AgentEventKind.FINISHED, data)
        return run

    def _emit(self, kind: AgentEventKind, data: dict[str, Any]) -> None:
        self.deps.sink.emit(AgentEvent(kind, self.deps.ctx.execution_id, self.state.iterations,
                                       data))
