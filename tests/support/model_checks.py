"""Wire assertions over recorded model requests: credentials, tool names, tool schemas.

The schema rules are each vendor's documented (or observed) rules for function parameters:

- ``openai`` strict mode: every object has ``type: object``, ``additionalProperties: false`` and
  lists every property in ``required``;
- ``gemini`` ``parameters`` (the OpenAPI-subset ``Schema``): only the keywords of that subset; no
  ``additionalProperties`` (the SDK refuses it outside Vertex), no ``$ref``/``$defs``, no
  ``exclusiveMinimum``/``exclusiveMaximum``, no ``const``, ``oneOf``, ``allOf`` or ``not``, and a
  single ``type`` rather than a list;
- ``anthropic`` ``input_schema``: an object schema (``type: object``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from tests.support.model_requests import RequestRecord, declared_tools

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
AUTH_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key"})

_GEMINI_KEYWORDS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
})
_GEMINI_REFUSED = ("additionalProperties", "$ref", "$defs", "definitions", "exclusiveMinimum",
                   "exclusiveMaximum", "const", "oneOf", "allOf", "not", "patternProperties")


def assert_no_credential_outside_auth(
    record: RequestRecord, secret: str, *, require_in_auth: bool = True
) -> None:
    """Fail unless ``secret`` occurs only in an auth header (and, by default, does occur there)."""
    assert secret, "an empty secret proves nothing"
    places = []
    if secret in record.path or secret in record.query:
        places.append("url")
    places += [f"header {name}" for name, value in record.headers.items()
               if secret in value and name not in AUTH_HEADERS]
    if secret.encode() in record.raw_body:
        places.append("body")
    assert not places, f"credential leaked into {', '.join(places)} of {record.path}"
    if require_in_auth:
        assert any(secret in record.headers.get(h, "") for h in AUTH_HEADERS), (
            f"credential not sent in any auth header of {record.path}")


def invalid_tool_names(record: RequestRecord) -> list[str]:
    """Declared tool names that break ``^[a-zA-Z0-9_-]{1,64}$``."""
    return [tool.name for tool in declared_tools(record) if not TOOL_NAME.match(tool.name)]


def assert_tool_names_valid(record: RequestRecord) -> None:
    """Fail when a declared tool name breaks the portable name pattern."""
    bad = invalid_tool_names(record)
    assert not bad, f"tool names outside ^[a-zA-Z0-9_-]{{1,64}}$: {bad}"


def check_tool_schema(vendor: str, schema: Mapping[str, Any] | None) -> list[str]:
    """Problems ``vendor`` would have with ``schema`` as a tool's parameters; empty when fine."""
    if vendor == "openai":
        return list(_openai_strict(schema, "$"))
    if vendor == "gemini":
        return list(_gemini_subset(schema, "$"))
    if vendor == "anthropic":
        if not isinstance(schema, Mapping) or schema.get("type") != "object":
            return ["$: input_schema must have type 'object'"]
        return []
    raise ValueError(f"unknown vendor {vendor!r}")


def _subschemas(schema: Mapping[str, Any], path: str) -> Iterator[tuple[Any, str]]:
    for name, sub in dict(schema.get("properties") or {}).items():
        yield sub, f"{path}.properties.{name}"
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield items, f"{path}.items"
    for key in ("anyOf", "oneOf", "allOf"):
        for i, sub in enumerate(schema.get(key) or []):
            yield sub, f"{path}.{key}[{i}]"
    for key in ("$defs", "definitions"):
        for name, sub in dict(schema.get(key) or {}).items():
            yield sub, f"{path}.{key}.{name}"
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield extra, f"{path}.additionalProperties"


def _is_object(schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "object" or (isinstance(kind, list) and "object" in kind) or (
        kind is None and "properties" in schema)


def _openai_strict(schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, Mapping):
        yield f"{path}: not a schema object"
        return
    if path == "$" and schema.get("type") != "object":
        yield "$: the root must have type 'object'"
    if _is_object(schema) and "$ref" not in schema:
        if schema.get("additionalProperties") is not False:
            yield f"{path}: additionalProperties must be false"
        props = set(dict(schema.get("properties") or {}))
        missing = sorted(props - set(schema.get("required") or []))
        if missing:
            yield f"{path}: properties missing from required: {missing}"
    for sub, sub_path in _subschemas(schema, path):
        yield from _openai_strict(sub, sub_path)


def _gemini_subset(schema: Any, path: str) -> Iterator[str]:
    if not isinstance(schema, Mapping):
        yield f"{path}: not a schema object"
        return
    for key in schema:
        if key in _GEMINI_REFUSED:
            yield f"{path}: {key} is not supported by Gemini"
        elif key not in _GEMINI_KEYWORDS:
            yield f"{path}: unknown keyword {key}"
    if isinstance(schema.get("type"), list):
        yield f"{path}: type must be a single type (use nullable)"
    for sub, sub_path in _subschemas(schema, path):
        yield from _gemini_subset(sub, sub_path)
