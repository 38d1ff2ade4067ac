"""The engine's spans and metrics: one ``invoke_agent`` per attempt, one ``chat {model}`` per
model call, one ``execute_tool {tool}`` per tool call (OpenTelemetry GenAI conventions, see
:mod:`services.telemetry.genai`).

Content (prompts, answers, tool arguments and results) goes into a span only when the deps carry
a ``content`` filter (``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, the filter
being the journal's redaction); otherwise no text of the conversation is ever an attribute.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from services.execution.messages import Message, ModelResponse, ToolCall
from services.execution.outcomes import RunResult
from services.execution.providers.profiles import telemetry_name
from services.execution.tool_domains.context import ToolDomainContext
from services.telemetry import genai
from services.telemetry.tracing import Attributes, SpanLike

ContentFilter = Callable[[str], str]


def agent_attributes(ctx: ToolDomainContext, provider: str, model: str,
                     cycle: int) -> Attributes:
    return {
        genai.OPERATION: "invoke_agent", genai.PROVIDER: telemetry_name(provider),
        genai.AGENT_NAME: genai.AGENT, genai.REQUEST_MODEL: model,
        genai.STUDIO_PROVIDER: provider, genai.EXECUTION_ID: ctx.execution_id,
        genai.CYCLE: cycle, genai.REQUEST_ID: ctx.request_id,
        genai.CORRELATION_ID: ctx.correlation_id,
    }


def chat_attributes(ctx: ToolDomainContext, provider: str, model: str,
                    cycle: int) -> Attributes:
    return {
        genai.OPERATION: "chat", genai.PROVIDER: telemetry_name(provider),
        genai.REQUEST_MODEL: model, genai.EXECUTION_ID: ctx.execution_id, genai.CYCLE: cycle,
    }


def tool_attributes(ctx: ToolDomainContext, call: ToolCall, cycle: int) -> Attributes:
    return {
        genai.OPERATION: "execute_tool", genai.TOOL_NAME: call.tool_name,
        genai.TOOL_CALL_ID: call.call_id, genai.TOOL_TYPE: "function",
        genai.DOMAIN: call.domain, genai.TOOL_OPERATION: call.operation,
        genai.EXECUTION_ID: ctx.execution_id, genai.CYCLE: cycle,
        genai.REQUEST_ID: ctx.request_id, genai.CORRELATION_ID: ctx.correlation_id,
    }


def record_response(span: SpanLike, response: ModelResponse, model: str, cost_usd: float,
                    content: ContentFilter | None) -> None:
    span.set_attribute(genai.RESPONSE_MODEL, model)
    if response.response_id:
        span.set_attribute(genai.RESPONSE_ID, response.response_id)
    if response.stop_reason:
        span.set_attribute(genai.FINISH_REASONS, [response.stop_reason])
    record_usage(span, response.usage.input_tokens, response.usage.output_tokens, cost_usd)
    if content is not None:
        span.set_attribute(genai.OUTPUT_MESSAGES, content(_json([response.message])))


def record_usage(span: SpanLike, input_tokens: int, output_tokens: int, cost_usd: float) -> None:
    span.set_attribute(genai.INPUT_TOKENS, input_tokens)
    span.set_attribute(genai.OUTPUT_TOKENS, output_tokens)
    span.set_attribute(genai.COST_USD, cost_usd)


def record_request(span: SpanLike, system: str, messages: list[Message],
                   content: ContentFilter | None) -> None:
    if content is not None:
        span.set_attribute(genai.SYSTEM_INSTRUCTIONS, content(system))
        span.set_attribute(genai.INPUT_MESSAGES, content(_json(messages)))


def record_tool(span: SpanLike, call: ToolCall, envelope: dict[str, Any],
                content: ContentFilter | None) -> str:
    """The envelope's outcome on the span (``error.type``: its code); answers the outcome."""
    outcome = "ok" if envelope.get("ok") else str((envelope.get("error") or {}).get(
        "code", "error"))
    if outcome != "ok":
        span.set_attribute(genai.ERROR_TYPE, outcome)
    if content is not None:
        span.set_attribute(genai.TOOL_ARGUMENTS, content(json.dumps(call.args)))
        span.set_attribute(genai.TOOL_RESULT, content(json.dumps(envelope)))
    return outcome


def record_outcome(span: SpanLike, run: RunResult) -> None:
    span.set_attribute(genai.OUTCOME, run.outcome.value)
    record_usage(span, run.usage.input_tokens, run.usage.output_tokens, run.usage.cost_usd)
    if run.error is not None:
        span.set_attribute(genai.ERROR_TYPE, str(run.error.get("code", "error")))


def _json(messages: list[Message]) -> str:
    return json.dumps([m.model_dump(mode="json") for m in messages])
