"""FrontierAgent: one tool loop for every provider.

Turn-based providers (codex, gemini, replay)::

    repair the history -> loop:
        guards (kill switch, iterations, budget, wall clock) -> model call (retried, stall-timed)
        -> no tool call: parse the final answer, finished
        -> each tool call: kill switch -> dispatch -> loop detection -> native tool results

Self-driving providers (claude) run their own loop; FrontierAgent hands them a tool gateway that
applies the same guards at every tool call and stops the session through ``interrupt()``.
Every step goes to the event sink; the outcome is a value (:class:`RunResult`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from services.execution.approvals import ApprovalGate
from services.execution.compaction import ContextPolicy, turns_in
from services.execution.context_keeper import ContextKeeper
from services.execution.context_windows import model_window
from services.execution.conversation import (
    PendingBatch,
    TokenCounter,
    elide_old_outputs,
    repair_interrupted,
    split_pending_batch,
)
from services.execution.errors import ErrorCode, ProviderError, ProviderUnavailable, StudioError
from services.execution.fallback import ModelFallback, session_prompt
from services.execution.guards import AgentLimits, LoopDetector, RetryPolicy
from services.execution.messages import (
    Message,
    ModelRequest,
    ModelResponse,
    Role,
    TextPart,
    ToolCall,
    ToolResultPart,
    ToolSchema,
    Usage,
)
from services.execution.outcomes import Outcome, RunResult, StopRun, UsageTotals
from services.execution.ports import (
    AgentEventKind,
    BudgetPort,
    EventSink,
    ModelClient,
    RunControl,
    SelfDrivingEngine,
    SessionOutcome,
    budget_refusal,
)
from services.execution.pricing import PriceTable, UsageAccumulator
from services.execution.prompts import parse_agent_result, repository_instructions, system_prompt
from services.execution.providers.profiles import provider_window
from services.execution.spans import (
    ContentFilter,
    agent_attributes,
    chat_attributes,
    record_outcome,
    record_request,
    record_response,
    record_usage,
)
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_gateway import LoopToolGateway
from services.execution.tool_runner import ToolRunner
from services.telemetry import genai, record, tracing
from services.telemetry.tracing import SpanLike

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class AgentDeps:
    """Everything the loop needs, injected by the composition root."""

    dispatcher: Dispatcher
    ctx: ToolDomainContext
    sink: EventSink
    prices: PriceTable = field(default_factory=PriceTable)
    limits: AgentLimits = field(default_factory=AgentLimits)
    control: RunControl | None = None
    budget: BudgetPort | None = None
    refresh_limits: Callable[[], AgentLimits] | None = None  # runtime settings, read each cycle
    spent: UsageTotals | None = None  # what earlier attempts of this execution used (resume)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Sleep = anyio.sleep
    clock: Callable[[], float] = time.monotonic
    rng: random.Random = field(default_factory=random.Random)
    task_kind: str = "repository work"
    # Tracing: ``traceparent`` values of earlier attempts (a resume links to them); the filter
    # that content passes through before it goes into a span (none: no content in spans).
    trace_links: tuple[str, ...] = ()
    trace_content: ContentFilter | None = None
    # The agent's role prompt and its author's own instructions (services.execution.roles,
    # services.execution.agent_profile), and the models that take over when the provider stays
    # unavailable (services.execution.fallback).
    role_prompt: str = ""
    node_prompt: str = ""
    fallback: ModelFallback | None = None
    # Approval gates: the policy applied before each tool call; ``resume_pending``: the
    # history ends with a batch of calls paused for an approval, run the unanswered ones first
    # (instead of answering them ``interrupted``).
    gate: ApprovalGate | None = None
    resume_pending: bool = False


class FrontierAgent:
    """Runs one execution's conversation to an outcome."""

    def __init__(self, engine: ModelClient | SelfDrivingEngine, deps: AgentDeps) -> None:
        self.engine = engine
        self.deps = deps
        self.tools = [ToolSchema(name=s.name, description=s.description,
                                 parameters=s.neutral_schema())
                      for s in deps.dispatcher.registry.specs()]
        instructions = repository_instructions(deps.ctx.resolved_workspace_root())
        self.system = system_prompt(deps.task_kind, self.tools, instructions,
                                    role_prompt=deps.role_prompt, node_prompt=deps.node_prompt)
        self.usage = UsageAccumulator(deps.prices)
        if deps.spent is not None:  # a resumed execution keeps counting from where it was
            self.usage.input_tokens = deps.spent.input_tokens
            self.usage.output_tokens = deps.spent.output_tokens
            self.usage.cached_input_tokens = deps.spent.cached_input_tokens
            self.usage.cache_write_input_tokens = deps.spent.cache_write_input_tokens
            self.usage.cost_usd = deps.spent.cost_usd
        self.tokens = TokenCounter()
        self.loops = LoopDetector(deps.limits.loop_window, deps.limits.loop_warn_at,
                                  deps.limits.loop_stop_at)
        self.iterations = 0
        self._started = deps.clock()
        self.runner = ToolRunner(deps.dispatcher, deps.ctx, deps.sink, self.loops,
                                 engine.provider, not isinstance(engine, SelfDrivingEngine),
                                 content=deps.trace_content, gate=deps.gate)
        self.pending: PendingBatch | None = None
        self.task = ""
        self._keeper: ContextKeeper | None = None
        self._emit = self.runner.emit
        self._warn = self.runner.warn

    # -- entry --------------------------------------------------------------------------------
    async def run(self, task: str, history: list[Message] | None = None) -> RunResult:
        """Run to an outcome; ``history`` resumes a recorded conversation."""
        history = history or []
        self.task = task
        if self.deps.resume_pending:
            history, self.pending = split_pending_batch(history)
        messages = repair_interrupted(history)
        if not messages:
            messages.append(Message(role=Role.USER, parts=[TextPart(text=task)]))
        cycle = turns_in(messages)
        if self.pending is not None:  # the paused turn counts: the next turn is a new cycle
            cycle += 1
        self.iterations = cycle
        with tracing.span(f"invoke_agent {genai.AGENT}", agent_attributes(
                self.deps.ctx, self.engine.provider, self.engine.model, cycle),
                links=self.deps.trace_links) as span:
            started = {
                "provider": self.engine.provider, "model": self.engine.model, "task": task,
                "resumed": history is not None and len(history) > 0,
                "limits": self.deps.limits.__dict__,
            }
            traceparent = tracing.current_traceparent()
            if traceparent is not None:  # what a later attempt links to
                started["traceparent"] = traceparent
            self._emit(AgentEventKind.STARTED, cycle, started)
            run = await self._run(task, messages, cycle)
            record_outcome(span, run)
            return run

    async def _run(self, task: str, messages: list[Message], cycle: int) -> RunResult:
        try:
            while True:
                engine = self.engine
                try:
                    if isinstance(engine, SelfDrivingEngine):
                        prompt = session_prompt(task, messages)
                        return await self._run_session(engine, prompt, messages)
                    return await self._run_turns(engine, messages, cycle)
                except ProviderUnavailable as exc:
                    if not await self._fall_back(exc, cycle):
                        raise
                    cycle = turns_in(messages)
        except StopRun as stop:
            return self.finish(stop.outcome, messages, cycle, code=stop.code,
                                message=stop.message)
        except ProviderError as exc:
            message = exc.message
            if exc.code is ErrorCode.CONTEXT_EXHAUSTED and self._keeper is not None:
                message += f" (context window: {self._keeper.policy.window} tokens)"
            return self.finish(Outcome.ERROR, messages, cycle, code=exc.code, message=message,
                               retry_after=exc.details.get("retry_after"))

    # -- turn-based loop ----------------------------------------------------------------------
    async def _run_turns(self, client: ModelClient, messages: list[Message],
                         cycle: int) -> RunResult:
        if self.pending is not None:  # the batch a pause for an approval interrupted
            warning = await self._resume_batch(self.pending, cycle - 1, messages)
            if warning:
                messages.append(Message(role=Role.USER, parts=[TextPart(text=warning)]))
        while True:
            self._check_before_model_call()
            await self._fit(client, messages, cycle)
            request = ModelRequest(system=self.system, messages=messages, tools=self.tools,
                                   cycle=cycle, cache_key=self.cache_key)
            self._emit(AgentEventKind.MODEL_REQUEST, cycle,
                       {"messages": len(messages), "tools": len(self.tools)})
            response = await self._complete(client, request, cycle)
            self.iterations += 1
            messages.append(response.message)
            calls = response.message.tool_calls
            if not calls:
                return self.finish(Outcome.FINISHED, messages, cycle,
                                    final_text=response.message.text)
            warning = await self._run_tools(calls, cycle, messages)
            if warning:
                messages.append(Message(role=Role.USER, parts=[TextPart(text=warning)]))
            cycle += 1

    # -- the context window (services.execution.compaction) ----------------------------------
    @property
    def cache_key(self) -> str:
        """The same for every request of the execution, resumed or not."""
        return f"studio-{self.deps.ctx.execution_id}"

    def context_keeper(self) -> ContextKeeper:
        """The keeper for the current model and limits (made again when either changes)."""
        limits = self.deps.limits
        window = model_window(self.engine.model, limits.context_window_tokens,
                              unknown=provider_window(self.engine.provider)).context
        policy = ContextPolicy(window=window, high=limits.context_high_mark,
                               low=min(limits.context_low_mark, limits.context_high_mark),
                               keep_turns=limits.context_keep_turns)
        keeper = self._keeper
        if keeper is None or keeper.policy != policy or keeper.model != self.engine.model:
            keeper = ContextKeeper(policy, self.system, self.tools, self.engine.model,
                                   self.tokens)
            self._keeper = keeper
        return keeper

    async def _fit(self, client: ModelClient, messages: list[Message], cycle: int) -> None:
        """Compact before a request that would pass the high mark (or, compaction off, elide
        old outputs above ``context_token_budget`` as before)."""
        limits = self.deps.limits
        if not limits.compaction_enabled:
            elide_old_outputs(messages, limits.context_token_budget, self.tokens)
            return

        async def summarize(history: list[Message]) -> str:
            return await self._summarize(client, history, cycle)

        done = await self.context_keeper().before_request(messages, self.task, summarize)
        if done is not None:
            self._emit(AgentEventKind.COMPACTION, cycle, done.to_event())

    async def _summarize(self, client: ModelClient, history: list[Message], cycle: int) -> str:
        """The summary turn's text: one model call with the fixed prompt, charged to the run
        (its usage is journaled; its answer only through the ``compaction`` event)."""
        request = ModelRequest(system=self.system, messages=history, tools=self.tools,
                               cycle=cycle, cache_key=self.cache_key)
        timeout = min(self.deps.limits.stall_s, max(self._remaining_wall_clock(), 0.001))
        try:
            with anyio.fail_after(timeout):
                response = await client.complete(request)
        except TimeoutError:
            raise StopRun(ErrorCode.STALLED,
                          f"no summary from the provider within {timeout:.0f}s") from None
        self.account(response.usage, response.model or self.engine.model, cycle)
        return response.message.text

    def _check_before_model_call(self) -> None:
        self.check_control()
        if self.deps.refresh_limits is not None:
            self.deps.limits = self.deps.refresh_limits()
        limits = self.deps.limits
        if self.iterations >= limits.max_iterations:
            raise StopRun(ErrorCode.MAX_ITERATIONS_EXCEEDED,
                          f"max_iterations ({limits.max_iterations}) reached")
        if self.usage.cost_usd >= limits.max_budget_usd:
            raise StopRun(ErrorCode.BUDGET_EXCEEDED,
                          f"execution budget ${limits.max_budget_usd:.2f} spent "
                          "(layer: execution)")
        self._check_repository_budget()
        if self._remaining_wall_clock() <= 0:
            raise StopRun(ErrorCode.STALLED, "wall-clock limit reached")

    def check_control(self) -> None:
        code = self.deps.control.check() if self.deps.control is not None else None
        if code is not None:
            raise StopRun(code, f"stopped: {code.value}")

    def _check_repository_budget(self) -> None:
        code = self.deps.budget.check() if self.deps.budget is not None else None
        if code is not None:
            raise StopRun(code, budget_refusal(self.deps.budget))

    def _check_before_tool_call(self) -> None:
        self.check_control()
        self._check_repository_budget()

    def _remaining_wall_clock(self) -> float:
        return self.deps.limits.wall_clock_s - (self.deps.clock() - self._started)

    async def _complete(self, client: ModelClient, request: ModelRequest,
                        cycle: int) -> ModelResponse:
        model = self.engine.model
        started = time.monotonic()
        with tracing.span(f"chat {model}", chat_attributes(
                self.deps.ctx, self.engine.provider, model, cycle), kind="client") as span:
            record_request(span, request.system, request.messages, self.deps.trace_content)
            try:
                return await self._attempts(client, request, cycle, span)
            except (ProviderError, StopRun) as exc:
                span.set_attribute(genai.ERROR_TYPE, exc.code.value)
                raise
            finally:
                record.model_call(self.engine.provider, model, time.monotonic() - started)

    async def _attempts(self, client: ModelClient, request: ModelRequest, cycle: int,
                        span: SpanLike) -> ModelResponse:
        policy = self.deps.retry
        for attempt in range(1, policy.max_attempts + 1):
            timeout = min(self.deps.limits.stall_s, max(self._remaining_wall_clock(), 0.001))
            try:
                with anyio.fail_after(timeout):
                    response = await client.complete(request)
            except TimeoutError:
                raise StopRun(ErrorCode.STALLED,
                              f"no answer from the provider within {timeout:.0f}s") from None
            except ProviderUnavailable as exc:
                if attempt >= policy.max_attempts:
                    raise
                raw = exc.details.get("retry_after")
                retry_after = float(raw) if isinstance(raw, int | float) else None
                delay = policy.delay(attempt, retry_after, self.deps.rng)
                span.add_event("retry", {"attempt": attempt, "delay_s": delay,
                                         "error.type": exc.code.value})
                record.retry(self.engine.provider)
                self._warn("provider_retry", f"attempt {attempt} failed ({exc.message}); "
                           f"retrying in {delay:.2f}s", cycle)
                await self.deps.sleep(delay)
                continue
            cost = self._record_response(response, cycle)
            record_response(span, response, response.model or self.engine.model, cost,
                            self.deps.trace_content)
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _record_response(self, response: ModelResponse, cycle: int) -> float:
        self._emit(AgentEventKind.MODEL_RESPONSE, cycle, {
            "text": response.message.text,
            "tool_calls": [c.model_dump(mode="json") for c in response.message.tool_calls],
            "stop_reason": response.stop_reason, "response_id": response.response_id,
            "message": response.message.model_dump(mode="json"),  # what a resume rebuilds
        })
        return self.account(response.usage, response.model or self.engine.model, cycle)

    def account(self, usage: Usage, model: str, cycle: int) -> float:
        """Add one usage report to the totals, charge the budget, emit a usage snapshot."""
        known_before = model in self.usage.unknown_models
        step = self.usage.add(model, usage)
        if not step.known_price and not known_before:
            self._warn("unknown_model_price", f"no price for model {model!r}; counted as $0",
                       cycle)
        if self.deps.budget is not None and step.cost_usd > 0:
            self.deps.budget.charge(step.cost_usd)
        record.usage(self.engine.provider, model, step.input_tokens, step.output_tokens,
                     step.cost_usd, cached_input_tokens=step.cached_input_tokens,
                     cache_write_input_tokens=step.cache_write_input_tokens)
        self._emit(AgentEventKind.USAGE, cycle, {
            "delta": {"input_tokens": step.input_tokens, "output_tokens": step.output_tokens,
                      "cached_input_tokens": step.cached_input_tokens,
                      "cache_write_input_tokens": step.cache_write_input_tokens,
                      "cost_usd": step.cost_usd},
            "total": self.totals().model_dump(mode="json"), "semantic": usage.semantic.value,
            "model": model, "price": self.deps.prices.describe(model),
        })
        return step.cost_usd

    def totals(self) -> UsageTotals:
        return UsageTotals(input_tokens=self.usage.input_tokens,
                           output_tokens=self.usage.output_tokens,
                           cost_usd=round(self.usage.cost_usd, 6),
                           cached_input_tokens=self.usage.cached_input_tokens,
                           cache_write_input_tokens=self.usage.cache_write_input_tokens)

    async def _run_tools(self, calls: list[ToolCall], cycle: int,
                         messages: list[Message]) -> str | None:
        """Dispatch a batch; the results (so far, when a guard stops it) join the history."""
        results: list[ToolResultPart] = []
        warning: str | None = None
        try:
            for call in calls:
                self.check_control()
                step = await self.runner.run(call, cycle)
                results.append(_result_part(call, step.envelope))
                warning = step.warning or warning
                if step.stop is not None:
                    raise step.stop
        finally:
            if results:
                messages.append(Message(role=Role.TOOL, parts=results))
        return warning

    async def _resume_batch(self, pending: PendingBatch, cycle: int,
                            messages: list[Message]) -> str | None:
        """Run the calls of ``pending`` that have no result yet (the journal recorded the
        model's turn, so the model is not asked again); one result message for the batch."""
        messages.append(pending.turn)
        results = list(pending.answered)
        answered = {part.call_id for part in results}
        warning: str | None = None
        try:
            for call in pending.turn.tool_calls:
                if call.call_id in answered:
                    continue
                self.check_control()
                step = await self.runner.run(call, cycle)
                results.append(_result_part(call, step.envelope))
                warning = step.warning or warning
                if step.stop is not None:
                    raise step.stop
        finally:
            messages.append(Message(role=Role.TOOL, parts=results))
        return warning

    # -- self-driving engines (claude) --------------------------------------------------------
    async def _run_session(self, engine: SelfDrivingEngine, task: str,
                           messages: list[Message]) -> RunResult:
        gateway = LoopToolGateway(self.runner, engine, self._check_before_tool_call)
        self._check_before_model_call()
        session: SessionOutcome | None = None
        started_ns, started = time.time_ns(), time.monotonic()
        with anyio.move_on_after(max(self._remaining_wall_clock(), 0.001)) as scope:
            try:
                session = await engine.run_session(
                    system=self.system, prompt=task, tools=self.tools, gateway=gateway,
                    max_turns=self.deps.limits.max_iterations,
                    max_budget_usd=self.deps.limits.max_budget_usd,
                )
            except StopRun:
                # the engine re-raises a guard's stop once its session has ended; what the
                # session used still counts
                session = engine.last_outcome
                if session is None:
                    raise
        if scope.cancelled_caught or session is None:
            raise StopRun(ErrorCode.STALLED, "wall-clock limit reached")
        self.iterations = session.turns
        cost = self.account(session.usage, engine.model, gateway.calls)
        for compaction in session.compactions:  # Claude Code compacts inside its own loop
            self._emit(AgentEventKind.COMPACTION, gateway.calls, dict(compaction))
        self._session_span(engine, session, cost, started_ns, time.monotonic() - started)
        if session.final_text:
            messages.append(Message(role=Role.ASSISTANT,
                                    parts=[TextPart(text=session.final_text)]))
        verdict = gateway.conclude(session)
        return self.finish(verdict.outcome, messages, gateway.calls,
                           final_text=verdict.final_text, code=verdict.code,
                           message=verdict.message, extra=verdict.extra)

    def _session_span(self, engine: SelfDrivingEngine, session: SessionOutcome, cost: float,
                      started_ns: int, seconds: float) -> None:
        """The session's model use as one ``chat`` span (its CLI ran the turns; the tool spans
        came from the gateway meanwhile)."""
        with tracing.span(f"chat {engine.model}", chat_attributes(
                self.deps.ctx, engine.provider, engine.model, session.turns), kind="client",
                start_time_ns=started_ns) as span:
            span.set_attribute(genai.RESPONSE_MODEL, engine.model)
            span.set_attribute(genai.FINISH_REASONS, [session.stop_reason])
            span.set_attribute("studio.turns", session.turns)
            record_usage(span, session.usage.input_tokens, session.usage.output_tokens, cost)
        record.model_call(engine.provider, engine.model, seconds)

    # -- model fallback -----------------------------------------------------------------------
    async def _fall_back(self, reason: ProviderUnavailable, cycle: int) -> bool:
        """Hand over to the next model of ``models`` that can be built; False when none is
        left. Each switch is a ``model_fallback`` event (from, to, reason, position)."""
        fallback = self.deps.fallback
        if fallback is None:
            return False
        old = self.engine
        if isinstance(old, SelfDrivingEngine) and old.last_outcome is not None:
            self.account(old.last_outcome.usage, old.model, cycle)  # what the session used
        while (step := fallback.next()) is not None:
            choice, build = step
            try:
                engine = build()
            except StudioError as exc:
                self._warn("model_fallback_failed", f"{choice.label()} cannot take over: "
                           f"{exc.message}", cycle)
                continue
            self._emit(AgentEventKind.MODEL_FALLBACK, cycle, {
                "from": {"provider": old.provider, "model": old.model},
                "to": {"provider": engine.provider, "model": engine.model},
                "reason": {"code": reason.code.value, "message": reason.message},
                "position": len(fallback.tried) + fallback.offset,
            })
            if not isinstance(old, SelfDrivingEngine):
                await old.aclose()
            self.engine = engine
            self.runner.provider = engine.provider
            self.runner.inline = not isinstance(engine, SelfDrivingEngine)
            self.usage.new_session()
            return True
        return False

    # -- the end ------------------------------------------------------------------------------
    def finish(self, outcome: Outcome, messages: list[Message], cycle: int, *,
                final_text: str = "", code: ErrorCode | None = None,
                message: str = "", extra: dict[str, Any] | None = None,
                retry_after: object = None) -> RunResult:
        result, parsed = parse_agent_result(final_text)
        error: dict[str, Any] | None = (
            {"code": code.value, "message": message} if code is not None else None)
        if error is not None and isinstance(retry_after, int | float):  # the provider's ask
            error["retry_after"] = float(retry_after)
        run = RunResult(
            execution_id=self.deps.ctx.execution_id, provider=self.engine.provider,
            model=self.engine.model, outcome=outcome, result=result,
            usage=self.totals(), iterations=self.iterations, parsed_result=parsed,
            error=error, messages=messages,
        )
        data = run.summary()
        data["parsed_result"] = parsed
        fallback = self.deps.fallback
        if fallback is not None and (fallback.tried or fallback.offset):  # not the first model
            data["finished_with"] = {"provider": self.engine.provider, "model": self.engine.model}
        data.update(extra or {})
        self._emit(AgentEventKind.FINISHED, cycle, data)
        return run


def _result_part(call: ToolCall, envelope: dict[str, Any]) -> ToolResultPart:
    return ToolResultPart(call_id=call.call_id, tool_name=call.tool_name, envelope=envelope,
                          is_error=not envelope.get("ok", False))
