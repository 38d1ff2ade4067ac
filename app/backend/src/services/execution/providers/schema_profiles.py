"""Per-provider schema profiles: the neutral JSON Schema of a tool, down-levelled for one vendor.

Pure functions, no SDK import:

- :func:`openai_strict`: OpenAI strict function tools. Every object closed
  (``additionalProperties: false``) with every property required; properties that were optional
  become nullable; defaults removed; an open map (``dict[str, str]``, e.g. the command ``env``)
  becomes an array of ``{name, value}`` objects, which :func:`openai_args_to_neutral` turns back
  into a map (and it drops the nulls sent for optional properties).
- :func:`gemini`: the subset Gemini's function declarations accept: no ``additionalProperties``,
  ``$ref``/``$defs`` inlined, no ``exclusiveMinimum``/``exclusiveMaximum``, ``const``, ``title``,
  ``default``, ``examples``; ``anyOf`` with ``null`` and type lists become ``nullable``; open maps
  become ``{name, value}`` arrays as for OpenAI (same inverse).
- :func:`anthropic`: the neutral schema as is, minus ``$schema``.
"""

from __future__ import annotations

import contextlib
import copy
import json
from typing import Any

Schema = dict[str, Any]

_MAX_REF_DEPTH = 32
_OPENAI_DROPPED = frozenset(
    {"$schema", "$id", "default", "examples", "minLength", "maxLength", "minProperties",
     "maxProperties", "uniqueItems", "propertyNames", "patternProperties", "unevaluatedProperties"}
)
_GEMINI_KEPT = frozenset(
    {"type", "format", "description", "nullable", "enum", "items", "properties", "required",
     "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength", "pattern", "anyOf",
     "propertyOrdering", "minProperties", "maxProperties"}
)
_GEMINI_FORMATS = {
    "string": frozenset({"enum", "date-time"}),
    "integer": frozenset({"int32", "int64"}),
    "number": frozenset({"float", "double"}),
}
_PAIR_NOTE = "A list of {name, value} pairs (stands for a map from name to value)."
JSON_VALUE_NOTE = "A JSON-encoded value."


# ---------------------------------------------------------------- shared helpers


def inline_refs(schema: Schema) -> Schema:
    """A copy with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced inline."""
    defs: Schema = {**schema.get("definitions", {}), **schema.get("$defs", {})}
    root = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    return _inline(root, defs, 0)  # type: ignore[no-any-return]


def _inline(node: Any, defs: Schema, depth: int) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs, depth) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        if depth >= _MAX_REF_DEPTH:
            raise ValueError(f"schema $ref nesting deeper than {_MAX_REF_DEPTH} (recursive?)")
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name not in defs:
            raise ValueError(f"unresolvable schema $ref {node['$ref']!r}")
        target = _inline(copy.deepcopy(defs[name]), defs, depth + 1)
        extra = {k: _inline(v, defs, depth) for k, v in node.items() if k != "$ref"}
        return {**target, **extra}
    out = {k: _inline(v, defs, depth) for k, v in node.items()}
    all_of = out.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
        del out["allOf"]
        out = {**all_of[0], **out}
    return out


def is_open_map(schema: Schema) -> bool:
    """An object whose keys are free (``additionalProperties`` a schema or true, no properties)."""
    if schema.get("type") != "object" or schema.get("properties"):
        return False
    extra = schema.get("additionalProperties")
    return extra is True or isinstance(extra, dict)


def _map_value_schema(schema: Schema) -> Schema | None:
    """The schema of a map's values; ``None`` when any JSON value is allowed."""
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        return extra
    return None


def _null_branch(branch: Any) -> bool:
    return isinstance(branch, dict) and branch.get("type") == "null"


def _pairs_schema(value_schema: Schema, description: str | None, *, closed: bool) -> Schema:
    pair: Schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "value": value_schema},
        "required": ["name", "value"],
    }
    if closed:
        pair["additionalProperties"] = False
    note = f"{description} {_PAIR_NOTE}" if description else _PAIR_NOTE
    return {"type": "array", "description": note, "items": pair}


# ---------------------------------------------------------------- OpenAI strict


def openai_strict(schema: Schema) -> Schema:
    """The neutral schema as an OpenAI strict function-tool schema (a new dict)."""
    return _strict(inline_refs(schema))


def _strict(node: Schema) -> Schema:
    if is_open_map(node):
        value = _map_value_schema(node)
        value_schema = _strict(value) if value is not None else {
            "type": "string", "description": JSON_VALUE_NOTE}
        return _pairs_schema(value_schema, node.get("description"), closed=True)
    out: Schema = {k: v for k, v in node.items() if k not in _OPENAI_DROPPED}
    if "anyOf" in out:
        out["anyOf"] = [_strict(b) for b in out["anyOf"]]
    if isinstance(out.get("items"), dict):
        out["items"] = _strict(out["items"])
    if out.get("type") == "object" or "properties" in out:
        props: Schema = out.get("properties") or {}
        required = set(out.get("required") or [])
        new_props = {}
        for name, prop in props.items():
            converted = _strict(prop)
            new_props[name] = converted if name in required else _nullable(converted)
        out["properties"] = new_props
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


def _nullable(schema: Schema) -> Schema:
    """``schema`` that also admits ``null``."""
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        if any(_null_branch(b) for b in any_of):
            return schema
        return {**schema, "anyOf": [*any_of, {"type": "null"}]}
    kind = schema.get("type")
    if isinstance(kind, str) and kind != "null":
        out = {**schema, "type": [kind, "null"]}
    elif isinstance(kind, list):
        out = schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    else:
        return {"anyOf": [schema, {"type": "null"}]}
    if isinstance(out.get("enum"), list) and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def openai_args_to_neutral(tool_name: str, args: Any, neutral_schema: Schema) -> dict[str, Any]:
    """Arguments a model sent for a profiled schema, back in the neutral shape.

    Name/value pair arrays become maps again; ``null`` sent for an optional property is dropped
    (the argument model then applies its default). Anything that does not fit is left as is, for
    the dispatcher's validation to answer ``invalid_arguments``.
    """
    if not isinstance(args, dict):
        raise ValueError(f"arguments of {tool_name} are not a JSON object")
    result = _to_neutral(args, inline_refs(neutral_schema))
    return result if isinstance(result, dict) else args


def _to_neutral(value: Any, schema: Schema) -> Any:
    if is_open_map(schema):
        return _pairs_to_map(value, _map_value_schema(schema))
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props: Schema = schema["properties"]
        required = set(schema.get("required") or [])
        return {
            k: (_to_neutral(v, props[k]) if k in props else v)
            for k, v in value.items()
            if not (v is None and k in props and k not in required)
        }
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_to_neutral(v, schema["items"]) for v in value]
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and value is not None:
        for branch in branches:
            if isinstance(branch, dict) and _fits(value, branch):
                return _to_neutral(value, branch)
    return value


def _fits(value: Any, schema: Schema) -> bool:
    kind = schema.get("type")
    if is_open_map(schema):
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return False


def _pairs_to_map(value: Any, value_schema: Schema | None) -> Any:
    if isinstance(value, dict):  # already a map (a lenient model): keep it
        return value
    if not isinstance(value, list):
        return value
    out: dict[str, Any] = {}
    for pair in value:
        if not (isinstance(pair, dict) and isinstance(pair.get("name"), str) and "value" in pair):
            return value  # not pairs: let validation refuse it
        item = pair["value"]
        if value_schema is None and isinstance(item, str):
            with contextlib.suppress(json.JSONDecodeError):  # a plain string is fine too
                item = json.loads(item)
        elif value_schema is not None:
            item = _to_neutral(item, value_schema)
        out[pair["name"]] = item
    return out


# ---------------------------------------------------------------- Gemini


def gemini(schema: Schema) -> Schema:
    """The neutral schema in the subset Gemini function declarations accept (a new dict)."""
    return _gemini(inline_refs(schema))


def _gemini(node: Schema) -> Schema:
    if is_open_map(node):
        value = _map_value_schema(node)
        value_schema = _gemini(value) if value is not None else {
            "type": "string", "description": JSON_VALUE_NOTE}
        return _pairs_schema(value_schema, node.get("description"), closed=False)
    node = _gemini_nullable(_gemini_bounds(node))
    if "const" in node and "enum" not in node:
        node = {**node, "enum": [node["const"]]}
    out: Schema = {k: v for k, v in node.items() if k in _GEMINI_KEPT}
    _gemini_enum_and_format(out)
    if isinstance(out.get("anyOf"), list):
        out["anyOf"] = [_gemini(b) for b in out["anyOf"] if isinstance(b, dict)]
    if isinstance(out.get("items"), dict):
        out["items"] = _gemini(out["items"])
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _gemini(v) for k, v in out["properties"].items()}
        if not out["properties"]:
            del out["properties"]
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {"type": "string"}
    return out


def _gemini_bounds(node: Schema) -> Schema:
    """``exclusiveMinimum``/``exclusiveMaximum`` as inclusive bounds (exact for integers)."""
    out = dict(node)
    step = 1 if out.get("type") == "integer" else 0
    low = out.pop("exclusiveMinimum", None)
    if isinstance(low, int | float) and not isinstance(low, bool):
        out.setdefault("minimum", low + step)
    high = out.pop("exclusiveMaximum", None)
    if isinstance(high, int | float) and not isinstance(high, bool):
        out.setdefault("maximum", high - step)
    return out


def _gemini_nullable(node: Schema) -> Schema:
    """``anyOf [X, null]`` and ``type: [X, "null"]`` as ``X`` with ``nullable: true``."""
    kind = node.get("type")
    if isinstance(kind, list):
        rest = [k for k in kind if k != "null"]
        out = {**node, "type": rest[0] if len(rest) == 1 else rest}
        if "null" in kind:
            out["nullable"] = True
        if len(rest) != 1:
            out.pop("type")
            out["anyOf"] = [{"type": k} for k in rest]
        return out
    any_of = node.get("anyOf")
    if isinstance(any_of, list) and any(_null_branch(b) for b in any_of):
        rest = [b for b in any_of if not _null_branch(b)]
        base = {k: v for k, v in node.items() if k != "anyOf"}
        merged = {**rest[0], **base} if len(rest) == 1 else {**base, "anyOf": rest}
        return {**_gemini_nullable(merged), "nullable": True}
    return node


def _gemini_enum_and_format(out: Schema) -> None:
    enum = out.get("enum")
    if isinstance(enum, list):
        values = [v for v in enum if v is not None]
        if all(isinstance(v, str) for v in values) and values:
            out["enum"] = values
            out.setdefault("type", "string")
        else:  # Gemini enums are strings only: say it in words instead
            del out["enum"]
            allowed = ", ".join(json.dumps(v) for v in values)
            out["description"] = f"{out.get('description', '')} One of: {allowed}.".strip()
    fmt = out.get("format")
    if fmt is not None and fmt not in _GEMINI_FORMATS.get(str(out.get("type")), frozenset()):
        del out["format"]


# ---------------------------------------------------------------- Anthropic


def anthropic(schema: Schema) -> Schema:
    """The neutral schema as an Anthropic ``input_schema`` (JSON Schema; ``$schema`` dropped)."""
    out = {k: v for k, v in schema.items() if k != "$schema"}
    out.setdefault("type", "object")
    return out
