"""The names the spans use: OpenTelemetry GenAI semantic conventions, and ``studio.*`` extras.

https://opentelemetry.io/docs/specs/semconv/gen-ai/ (``invoke_agent``, ``chat``,
``execute_tool`` spans). Values that the conventions do not cover (the cost, the execution id,
the tool domain) are ``studio.*`` attributes.
"""

from __future__ import annotations

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
AGENT_NAME = "gen_ai.agent.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_MODEL = "gen_ai.response.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
TOOL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_RESULT = "gen_ai.tool.call.result"
ERROR_TYPE = "error.type"

EXECUTION_ID = "studio.execution_id"
CYCLE = "studio.cycle"
DOMAIN = "studio.domain"
TOOL_OPERATION = "studio.operation"
REQUEST_ID = "studio.request_id"
CORRELATION_ID = "studio.correlation_id"
STUDIO_PROVIDER = "studio.provider"
COST_USD = "studio.cost_usd"
OUTCOME = "studio.outcome"

AGENT = "studio"

# A provider's ``gen_ai.provider.name`` (the conventions' well-known value: ``openai``,
# ``gcp.gemini``, ``anthropic``) is a fact of its profile:
# services.execution.providers.profiles.telemetry_name.

