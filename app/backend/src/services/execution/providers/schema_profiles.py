"""Per-vendor schema profiles: the neutral JSON Schema of a tool, down-levelled for one vendor.

Pure functions, no SDK import. One walker, :func:`walk`, visits every sub-schema; a
:class:`VendorHooks` value says what one vendor changes. At each node:

1. an open map (``dict[str, str]``, e.g. the command ``env``: an object whose
   ``additionalProperties`` is a schema or true and which has no properties) becomes an array of
   ``{name, value}`` objects (a map of any values carries each value as a JSON string), and
   :func:`openai_args_to_neutral` turns such arrays back into maps;
2. ``hooks.shape`` rewrites the node itself (the keywords the vendor refuses dropped or
   translated);
3. the sub-schemas under ``anyOf``, ``items`` and ``properties`` are walked;
4. ``hooks.finish`` rewrites the node once its children are done.

The vendors (the profile of each provider names the one it uses, see :mod:`.profiles`):

- :data:`OPENAI_STRICT` (:func:`openai_strict`): OpenAI strict function tools. Every object
  closed (``additionalProperties: false``) with every property required; properties that were
  optional become nullable; defaults removed; the inverse drops the nulls sent for optional
  properties.
- :data:`GEMINI` (:func:`gemini`): the subset Gemini's function declarations accept: no
  ``additionalProperties``, no ``exclusiveMinimum``/``exclusiveMaximum``, ``const``, ``title``,
  ``default``, ``examples``; ``anyOf`` with ``null`` and type lists become ``nullable``.
- :func:`anthropic`: no walk; the neutral schema as is, minus ``$schema``.
- :func:`neutral`: no walk; a copy (the replay provider sends no schema anywhere).

Before a walk, :func:`inline_refs` replaces every local ``$ref`` by its definition. A hostile
schema fails with a ``ValueError`` naming the place: a sub-schema that is not an object, nesting
past :data:`MAX_NESTING` containers (or :data:`MAX_DEPTH` levels once inlined), a ``$ref`` chain
past :data:`MAX_REF_DEPTH` (a recursive definition), more than :data:`MAX_NODES` objects once
inlined.
"""

from __future__ import annotations

import contextlib
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Schema = dict[str, Any]

MAX_REF_DEPTH = 32  # $ref inside $ref: deeper than this is a recursive definition
MAX_NESTING = 200  # JSON objects and arrays inside each other, in the schema as given
MAX_DEPTH = 100  # schema levels the walker descends, once the refs are inlined
MAX_NODES = 50_000  # objects after inlining (a few $defs used twice at each level explode)
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


# ---------------------------------------------------------------- $ref inlining


def inline_refs(schema: Schema) -> Schema:
    """A copy with every local ``$ref`` (``#/$defs/X``, ``#/definitions/X``) replaced inline."""
    _require_object(schema, "$")
    defs: Schema = {}
    for key in ("definitions", "$defs"):
        found = schema.get(key, {})
        if not isinstance(found, dict):
            raise ValueError(f"schema {key} is a {type(found).__name__}, not an object")
        defs.update(found)
    root = {k: v for k, v in schema.items() if k not in ("$defs", "definitions")}
    return _Inliner(defs).inline(root, 0, 0)  # type: ignore[no-any-return]


class _Inliner:
    """One inlining pass: the definitions, and how many objects it has produced so far."""

    def __init__(self, defs: Schema) -> None:
        self.defs = defs
        self.nodes = 0

    def inline(self, node: Any, refs: int, nesting: int) -> Any:
        if not isinstance(node, dict | list):
            return node
        if nesting >= MAX_NESTING:
            raise ValueError(f"schema nested deeper than {MAX_NESTING} objects and arrays")
        if isinstance(node, list):
            return [self.inline(item, refs, nesting + 1) for item in node]
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise ValueError(f"schema expands to more than {MAX_NODES} objects once its "
                             "$refs are inlined")
        if "$ref" in node:
            return self._resolve(node, refs, nesting)
        out = {k: self.inline(v, refs, nesting + 1) for k, v in node.items()}
        all_of = out.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            del out["allOf"]
            out = {**all_of[0], **out}
        return out

    def _resolve(self, node: Schema, refs: int, nesting: int) -> Schema:
        if refs >= MAX_REF_DEPTH:
            raise ValueError(f"schema $ref nesting deeper than {MAX_REF_DEPTH} (recursive?)")
        name = str(node["$ref"]).rsplit("/", 1)[-1]
        if name not in self.defs:
            raise ValueError(f"unresolvable schema $ref {node['$ref']!r}")
        target = self.inline(copy.deepcopy(self.defs[name]), refs + 1, nesting)
        if not isinstance(target, dict):
            raise ValueError(f"schema $ref {node['$ref']!r} does not name a schema object")
        extra = {k: self.inline(v, refs, nesting + 1) for k, v in node.items() if k != "$ref"}
        return {**target, **extra}


# ---------------------------------------------------------------- the walker


@dataclass(frozen=True)
class VendorHooks:
    """What one vendor changes in the walk (see the module docstring).

    ``shape`` must return a new dict (the walker writes the walked children into it);
    ``closed_pairs`` says whether the ``{name, value}`` objects of an open map are closed
    (``additionalProperties: false``).
    """

    name: str
    shape: Callable[[Schema], Schema]
    finish: Callable[[Schema], Schema]
    closed_pairs: bool


def to_vendor(schema: Schema, hooks: VendorHooks) -> Schema:
    """The neutral ``schema`` (refs and all) as ``hooks.name`` accepts it (a new dict)."""
    return walk(inline_refs(schema), hooks)


def walk(node: Any, hooks: VendorHooks, path: str = "$", depth: int = 0) -> Schema:
    """``node`` (a schema without ``$ref``) with ``hooks`` applied at every level."""
    _require_object(node, path)
    if depth >= MAX_DEPTH:
        raise ValueError(f"schema nested deeper than {MAX_DEPTH} levels at {path}")
    if is_open_map(node):
        value = _map_value_schema(node)
        value_schema = ({"type": "string", "description": JSON_VALUE_NOTE} if value is None else
                        walk(value, hooks, f"{path}.additionalProperties", depth + 1))
        return _pairs_schema(value_schema, node.get("description"), closed=hooks.closed_pairs)
    out = hooks.shape(node)
    branches = _container(out, "anyOf", list, path)
    if branches is not None:
        out["anyOf"] = [walk(b, hooks, f"{path}.anyOf[{i}]", depth + 1)
                        for i, b in enumerate(branches)]
    if isinstance(out.get("items"), dict):  # a list of items (tuple form) is left as is
        out["items"] = walk(out["items"], hooks, f"{path}.items", depth + 1)
    props = _container(out, "properties", dict, path)
    if props is not None:
        out["properties"] = {k: walk(v, hooks, f"{path}.properties.{k}", depth + 1)
                             for k, v in props.items()}
    return hooks.finish(out)


def _require_object(node: Any, path: str) -> None:
    if not isinstance(node, dict):
        raise ValueError(f"schema at {path} is a {type(node).__name__}, not an object")


def _container(node: Schema, key: str, kind: type, path: str) -> Any:
    """``node[key]`` when it is a ``kind``; ``None`` when absent or null; else a ValueError."""
    value = node.get(key)
    if value is None or isinstance(value, kind):
        return value
    raise ValueError(f"schema at {path}.{key} is a {type(value).__name__}, not a {kind.__name__}")


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


def _names(required: Any) -> set[str]:
    """The property names a ``required`` keyword lists (nothing when it is not a list)."""
    return {n for n in required if isinstance(n, str)} if isinstance(required, list) else set()


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


def _openai_shape(node: Schema) -> Schema:
    return {k: v for k, v in node.items() if k not in _OPENAI_DROPPED}


def _openai_finish(out: Schema) -> Schema:
    """Close an object: every property required, the optional ones nullable instead."""
    if out.get("type") == "object" or "properties" in out:
        props: Schema = out.get("properties") or {}
        required = _names(out.get("required"))
        out["properties"] = {name: prop if name in required else _nullable(prop)
                             for name, prop in props.items()}
        out["required"] = list(props)
        out["additionalProperties"] = False
    return out


OPENAI_STRICT = VendorHooks("openai strict", _openai_shape, _openai_finish, closed_pairs=True)


def openai_strict(schema: Schema) -> Schema:
    """The neutral schema as an OpenAI strict function-tool schema (a new dict)."""
    return to_vendor(schema, OPENAI_STRICT)


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


# ---------------------------------------------------------------- the inverse


def openai_args_to_neutral(tool_name: str, args: Any, neutral_schema: Schema) -> dict[str, Any]:
    """Arguments a model sent for a profiled schema, back in the neutral shape.

    Name/value pair arrays become maps again; ``null`` sent for an optional property is dropped
    (the argument model then applies its default). Anything that does not fit is left as is, for
    the dispatcher's validation to answer ``invalid_arguments``.
    """
    if not isinstance(args, dict):
        raise ValueError(f"arguments of {tool_name} are not a JSON object")
    result = _to_neutral(args, _inlined(neutral_schema))
    return result if isinstance(result, dict) else args


_INLINED: dict[int, tuple[Schema, Schema]] = {}
_INLINED_MAX = 256


def _inlined(schema: Schema) -> Schema:
    """:func:`inline_refs` of ``schema``, remembered per schema object (a run's tools keep
    theirs: each call's arguments would inline it again); read, never changed."""
    hit = _INLINED.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    inlined = inline_refs(schema)
    if len(_INLINED) >= _INLINED_MAX:
        _INLINED.clear()
    _INLINED[id(schema)] = (schema, inlined)
    return inlined


def _to_neutral(value: Any, schema: Any) -> Any:
    if not isinstance(schema, dict):  # a broken schema: leave the value for validation
        return value
    if is_open_map(schema):
        return _pairs_to_map(value, _map_value_schema(schema))
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props: Schema = schema["properties"]
        required = _names(schema.get("required"))
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


def _gemini_shape(node: Schema) -> Schema:
    if isinstance(node.get("anyOf"), list):  # a branch that is no schema object is dropped
        node = {**node, "anyOf": [b for b in node["anyOf"] if isinstance(b, dict)]}
    node = _gemini_nullable(_gemini_bounds(node))
    if "const" in node and "enum" not in node:
        node = {**node, "enum": [node["const"]]}
    out: Schema = {k: v for k, v in node.items() if k in _GEMINI_KEPT}
    _gemini_enum_and_format(out)
    return out


def _gemini_finish(out: Schema) -> Schema:
    if isinstance(out.get("properties"), dict) and not out["properties"]:
        del out["properties"]
    if out.get("type") == "array" and "items" not in out:
        out["items"] = {"type": "string"}
    return out


GEMINI = VendorHooks("gemini", _gemini_shape, _gemini_finish, closed_pairs=False)


def gemini(schema: Schema) -> Schema:
    """The neutral schema in the subset Gemini function declarations accept (a new dict)."""
    return to_vendor(schema, GEMINI)


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
    formats = _GEMINI_FORMATS.get(str(out.get("type")), frozenset())
    if fmt is not None and (not isinstance(fmt, str) or fmt not in formats):
        del out["format"]


# ---------------------------------------------------------------- no walk


def anthropic(schema: Schema) -> Schema:
    """The neutral schema as an Anthropic ``input_schema`` (JSON Schema; ``$schema`` dropped)."""
    _require_object(schema, "$")
    out = {k: v for k, v in schema.items() if k != "$schema"}
    out.setdefault("type", "object")
    return out


def neutral(schema: Schema) -> Schema:
    """The neutral schema unchanged (a copy): for a provider that sends no schema anywhere."""
    _require_object(schema, "$")
    return copy.deepcopy(schema)
