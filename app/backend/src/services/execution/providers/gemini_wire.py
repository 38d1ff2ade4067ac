"""Neutral messages to and from Gemini ``generateContent`` wire JSON (camelCase, as on the wire).

Pure functions over plain dicts, no SDK import. The model's ``thoughtSignature`` travels in
``ToolCallPart.provider_meta["thought_signature"]`` (and, for signed text parts, in the message's
``provider_meta["text_thought_signatures"]``) and is sent back byte for byte: Gemini refuses a
function-calling turn whose signature is missing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from services.execution.messages import (
    Message,
    Role,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolSchema,
    Usage,
)
from services.execution.providers.common import make_tool_call
from services.execution.providers.schema_profiles import gemini as gemini_profile

SIGNATURE = "thought_signature"
TEXT_SIGNATURES = "text_thought_signatures"
_SYNTHETIC_ID = re.compile(r"^\d+-\d+$")  # our `<cycle>-<index>` ids: never sent to Gemini


def function_declarations(tools: list[ToolSchema]) -> list[dict[str, Any]]:
    """The ``tools`` entry of a request: one ``functionDeclarations`` list."""
    if not tools:
        return []
    decls = [
        {"name": t.name, "description": t.description,
         "parametersJsonSchema": gemini_profile(t.parameters)}
        for t in tools
    ]
    return [{"functionDeclarations": decls}]


def content(message: Message) -> dict[str, Any] | None:
    """The ``Content`` of one neutral message (``None`` when it has nothing to send)."""
    if message.role is Role.ASSISTANT:
        return _model_content(message)
    parts: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, ToolResultPart):
            response: dict[str, Any] = {"name": part.tool_name, "response": part.envelope}
            if not _SYNTHETIC_ID.match(part.call_id):
                response["id"] = part.call_id
            parts.append({"functionResponse": response})
        elif isinstance(part, TextPart):
            parts.append({"text": part.text})
    return {"role": "user", "parts": parts} if parts else None


def _model_content(message: Message) -> dict[str, Any] | None:
    text_signatures: Mapping[str, str] = message.provider_meta.get(TEXT_SIGNATURES, {})
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(message.parts):
        if isinstance(part, TextPart):
            wire: dict[str, Any] = {"text": part.text}
            signature = text_signatures.get(str(index))
        elif isinstance(part, ToolCallPart):
            call: dict[str, Any] = {"name": part.call.tool_name, "args": _echo_args(part)}
            if not part.provider_meta.get("synthetic_id"):
                call["id"] = part.call.call_id
            wire = {"functionCall": call}
            signature = part.provider_meta.get(SIGNATURE)
        else:
            continue
        if signature:
            wire["thoughtSignature"] = signature
        parts.append(wire)
    return {"role": "model", "parts": parts} if parts else None


def _echo_args(part: ToolCallPart) -> Any:
    raw = part.provider_meta.get("args")
    return raw if isinstance(raw, dict) else part.call.args


def parse(
    data: Mapping[str, Any], tools: Mapping[str, ToolSchema], cycle: int
) -> tuple[Message, Usage, str]:
    """``(assistant message, usage, stop reason)`` of a ``generateContent`` answer."""
    candidates = data.get("candidates") or []
    usage = usage_of(data.get("usageMetadata"))
    if not candidates:
        reason = (data.get("promptFeedback") or {}).get("blockReason") or "no_candidates"
        return Message(role=Role.ASSISTANT), usage, f"blocked:{reason}"
    candidate = candidates[0]
    parts: list[TextPart | ToolCallPart | ToolResultPart] = []
    text_signatures: dict[str, str] = {}
    calls = 0
    for raw in (candidate.get("content") or {}).get("parts") or []:
        signature = raw.get("thoughtSignature")
        if "functionCall" in raw:
            fc = raw["functionCall"] or {}
            provider_id = fc.get("id")
            call = make_tool_call(provider_id, fc.get("name", ""), fc.get("args"), tools,
                                  cycle=cycle, index=calls)
            calls += 1
            meta: dict[str, Any] = {"args": fc.get("args")}
            if signature:
                meta[SIGNATURE] = signature
            if not provider_id:
                meta["synthetic_id"] = True
            parts.append(ToolCallPart(call=call, provider_meta=meta))
        elif "text" in raw and not raw.get("thought"):
            if signature:
                text_signatures[str(len(parts))] = signature
            parts.append(TextPart(text=str(raw["text"])))
    message = Message(
        role=Role.ASSISTANT, parts=parts,
        provider_meta={TEXT_SIGNATURES: text_signatures} if text_signatures else {},
    )
    stop = "tool_calls" if calls else str(candidate.get("finishReason") or "STOP").lower()
    return message, usage, stop


def usage_of(raw: Mapping[str, Any] | None) -> Usage:
    """``usageMetadata`` as neutral usage (thinking tokens are billed as output)."""
    if not raw:
        return Usage()
    return Usage(
        input_tokens=int(raw.get("promptTokenCount") or 0),
        output_tokens=int(raw.get("candidatesTokenCount") or 0)
        + int(raw.get("thoughtsTokenCount") or 0),
        cached_input_tokens=int(raw.get("cachedContentTokenCount") or 0),
    )
