"""What an MCP ``CallToolResult`` becomes in a tool envelope: plain JSON, size-capped.

Text stays text (head and tail kept around a marker when it exceeds the cap); images and audio
are described (type, MIME type, size), not inlined, since a tool result is read as text;
embedded resources keep their URI and text; structured content is kept when it fits the cap.
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

ELISION_MARKER = "\n[... {n} bytes elided ...]\n"
ERROR_TEXT_CAP = 2000


def cap_text(text: str, cap_bytes: int) -> tuple[str, bool]:
    """``text`` with its middle elided when it is longer than ``cap_bytes`` (UTF-8)."""
    raw = text.encode("utf-8")
    if len(raw) <= cap_bytes:
        return text, False
    half = max(cap_bytes // 2, 1)
    head = raw[:half].decode("utf-8", errors="ignore")
    tail = raw[-half:].decode("utf-8", errors="ignore")
    return head + ELISION_MARKER.format(n=len(raw) - 2 * half) + tail, True


def _block(block: types.ContentBlock, cap_bytes: int) -> tuple[dict[str, Any], bool]:
    if isinstance(block, types.TextContent):
        text, cut = cap_text(block.text, cap_bytes)
        return {"type": "text", "text": text}, cut
    if isinstance(block, types.ImageContent | types.AudioContent):
        size = len(block.data) * 3 // 4  # base64 on the wire
        return {"type": block.type, "mime_type": block.mime_type, "size_bytes": size}, False
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        out: dict[str, Any] = {"type": "resource", "uri": str(resource.uri),
                               "mime_type": resource.mime_type}
        if isinstance(resource, types.TextResourceContents):
            out["text"], cut = cap_text(resource.text, cap_bytes)
            return out, cut
        return out, False
    return {"type": "resource_link", "uri": str(block.uri), "name": block.name}, False


def content_json(result: types.CallToolResult, cap_bytes: int) -> tuple[list[dict[str, Any]], bool]:
    """The content blocks as JSON, and whether any was cut."""
    blocks: list[dict[str, Any]] = []
    truncated = False
    for block in result.content:
        converted, cut = _block(block, cap_bytes)
        blocks.append(converted)
        truncated = truncated or cut
    return blocks, truncated


def result_json(result: types.CallToolResult, cap_bytes: int) -> dict[str, Any]:
    """``{"content": [...], "structured": ..., "is_error": bool}`` (+ ``truncated`` if cut)."""
    content, truncated = content_json(result, cap_bytes)
    structured = result.structured_content
    if structured is not None and len(json.dumps(structured, default=str)) > cap_bytes:
        structured, truncated = None, True
    payload: dict[str, Any] = {"content": content, "structured": structured,
                               "is_error": result.is_error}
    if truncated:
        payload["truncated"] = True
    return payload


def error_text(result: types.CallToolResult) -> str:
    """The text an erroring tool gave, short enough for an error message."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    text, _ = cap_text("\n".join(texts).strip() or "the tool reported an error", ERROR_TEXT_CAP)
    return text
