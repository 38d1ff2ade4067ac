"""The schema walker and its vendor hooks, including hostile schemas.

A tool schema may come from an MCP server, so every profile either returns a schema or raises a
``ValueError`` that says where the schema is wrong: never a ``RecursionError``, a ``TypeError`` or
an expansion that runs away.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.execution.providers import schema_profiles as sp
from tests.support.model_checks import check_tool_schema

PROFILES = {"openai": sp.openai_strict, "gemini": sp.gemini, "anthropic": sp.anthropic,
            "neutral": sp.neutral}
WALKED = {"openai": sp.openai_strict, "gemini": sp.gemini}


def _recording_hooks(seen: list[str]) -> sp.VendorHooks:
    def shape(node: dict[str, Any]) -> dict[str, Any]:
        seen.append(str(node.get("description")))
        return {**node, "x-shaped": True}

    def finish(node: dict[str, Any]) -> dict[str, Any]:
        return {**node, "x-finished": sorted(k for k in node if k.startswith("x-"))}

    return sp.VendorHooks("recorder", shape, finish, closed_pairs=False)


def _nested(levels: int, leaf: dict[str, Any]) -> dict[str, Any]:
    node = leaf
    for _ in range(levels):
        node = {"type": "object", "properties": {"p": node}, "required": ["p"]}
    return node


# ---------------------------------------------------------------- the walker


def test_the_walker_shapes_every_sub_schema_before_its_children_and_finishes_after() -> None:
    seen: list[str] = []
    schema = {"description": "root", "type": "object", "properties": {
        "a": {"description": "a", "anyOf": [{"description": "a0"}, {"description": "a1"}]},
        "b": {"description": "b", "type": "array", "items": {"description": "b-items"}},
        "m": {"type": "object", "additionalProperties": {"description": "m-values"}},
    }}
    out = sp.walk(schema, _recording_hooks(seen))
    assert seen == ["root", "a", "a0", "a1", "b", "b-items", "m-values"]
    assert out["x-finished"] == ["x-shaped"]
    assert out["properties"]["a"]["anyOf"][1]["x-finished"] == ["x-shaped"]
    assert out["properties"]["b"]["items"]["x-shaped"] is True
    pairs = out["properties"]["m"]  # an open map is replaced, not shaped
    assert pairs["type"] == "array" and "x-shaped" not in pairs
    assert pairs["items"]["properties"]["value"]["x-shaped"] is True
    assert "additionalProperties" not in pairs["items"]


@pytest.mark.parametrize(("hooks", "closed"), [(sp.OPENAI_STRICT, True), (sp.GEMINI, False)])
def test_open_map_pairs_are_closed_as_the_vendor_requires(hooks: sp.VendorHooks,
                                                          closed: bool) -> None:
    out = sp.to_vendor({"type": "object", "additionalProperties": True}, hooks)
    assert out["items"]["properties"]["value"]["description"] == sp.JSON_VALUE_NOTE
    assert ("additionalProperties" in out["items"]) is closed


def test_the_walker_leaves_its_input_untouched() -> None:
    schema = _nested(3, {"type": "string", "default": "x", "title": "T"})
    before = repr(schema)
    for profile in PROFILES.values():
        profile(schema)
    assert repr(schema) == before


def test_tuple_items_are_left_as_they_are() -> None:
    schema = {"type": "array", "items": [{"type": "string"}]}
    assert sp.walk(schema, sp.OPENAI_STRICT)["items"] == [{"type": "string"}]


# ---------------------------------------------------------------- hostile schemas


@pytest.mark.parametrize("profile", PROFILES.values(), ids=list(PROFILES))
@pytest.mark.parametrize("root", [[], "object", 3, None, True], ids=repr)
def test_a_root_that_is_not_an_object_is_refused(profile: Any, root: Any) -> None:
    with pytest.raises(ValueError, match=r"schema at \$ is a .*, not an object"):
        profile(root)


@pytest.mark.parametrize("profile", WALKED.values(), ids=list(WALKED))
@pytest.mark.parametrize("prop", [True, 3, "string", ["x"]], ids=repr)
def test_a_property_schema_that_is_not_an_object_is_refused_with_its_path(profile: Any,
                                                                          prop: Any) -> None:
    schema = {"type": "object", "properties": {"outer": {
        "type": "object", "properties": {"bad": prop}}}}
    with pytest.raises(ValueError, match=r"\$\.properties\.outer\.properties\.bad is a "):
        profile(schema)


@pytest.mark.parametrize("profile", WALKED.values(), ids=list(WALKED))
@pytest.mark.parametrize(("schema", "where"), [
    ({"type": "object", "properties": [{"name": "x"}]}, r"\$\.properties is a list, not a dict"),
    ({"anyOf": {"type": "string"}}, r"\$\.anyOf is a dict, not a list"),
    ({"type": "object", "$defs": [1]}, r"\$defs is a list, not an object"),
])
def test_keywords_of_the_wrong_kind_are_refused(profile: Any, schema: dict[str, Any],
                                                where: str) -> None:
    with pytest.raises(ValueError, match=where):
        profile(schema)


def test_openai_refuses_a_branch_that_is_not_an_object_and_gemini_drops_it() -> None:
    schema = {"type": "object", "properties": {"x": {"anyOf": [{"type": "string"}, 7]}},
              "required": ["x"]}
    with pytest.raises(ValueError, match=r"\$\.properties\.x\.anyOf\[1\] is a int"):
        sp.openai_strict(schema)
    assert sp.gemini(schema)["properties"]["x"] == {"anyOf": [{"type": "string"}]}
    nullable = {"type": "object", "properties": {"x": {"anyOf": [7, {"type": "null"}]}}}
    assert sp.gemini(nullable)["properties"]["x"] == {"anyOf": [], "nullable": True}


@pytest.mark.parametrize("profile", [*WALKED.values(), sp.inline_refs],
                         ids=[*WALKED, "inline_refs"])
@pytest.mark.parametrize("levels", [150, 5000])
def test_deep_nesting_is_refused_not_a_recursion_error(profile: Any, levels: int) -> None:
    with pytest.raises(ValueError, match="nested deeper than"):
        profile(_nested(levels, {"type": "string"}))


def test_deep_nesting_in_arrays_is_refused_too() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(3000):
        schema = {"type": "array", "items": schema}
    with pytest.raises(ValueError, match="nested deeper than"):
        sp.openai_strict(schema)


def test_the_inverse_refuses_a_deep_schema_too() -> None:
    with pytest.raises(ValueError, match="nested deeper than"):
        sp.openai_args_to_neutral("t", {"p": {}}, _nested(5000, {"type": "string"}))


@pytest.mark.parametrize(("vendor", "profile"), WALKED.items(), ids=list(WALKED))
def test_nesting_real_tools_never_reach_still_passes(vendor: str, profile: Any) -> None:
    out = profile(_nested(40, {"type": "string"}))
    assert check_tool_schema(vendor, out) == []


@pytest.mark.parametrize("profile", [*WALKED.values(), sp.inline_refs],
                         ids=[*WALKED, "inline_refs"])
@pytest.mark.parametrize("defs", [
    {"A": {"$ref": "#/$defs/A"}},
    {"A": {"type": "array", "items": {"$ref": "#/$defs/B"}},
     "B": {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}}},
], ids=["self", "mutual"])
def test_ref_cycles_are_refused(profile: Any, defs: dict[str, Any]) -> None:
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/A"}}}
    with pytest.raises(ValueError, match="recursive"):
        profile(schema)


@pytest.mark.parametrize(("defs", "message"), [
    ({}, "unresolvable schema \\$ref"),
    ({"A": ["not", "a", "schema"]}, "does not name a schema object"),
])
def test_refs_to_nothing_usable_are_refused(defs: dict[str, Any], message: str) -> None:
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/A"}}}
    with pytest.raises(ValueError, match=message):
        sp.openai_strict(schema)


def test_definitions_that_double_at_each_level_are_refused_quickly() -> None:
    """Thirty levels of ``{a: D(n+1), b: D(n+1)}`` would inline to 2**30 objects."""
    defs = {f"D{n}": {"type": "object", "properties": {
        "a": {"$ref": f"#/$defs/D{n + 1}"}, "b": {"$ref": f"#/$defs/D{n + 1}"}}}
        for n in range(30)}
    defs["D30"] = {"type": "string"}
    schema = {"type": "object", "$defs": defs, "properties": {"root": {"$ref": "#/$defs/D0"}}}
    started = time.monotonic()
    with pytest.raises(ValueError, match=f"more than {sp.MAX_NODES} objects"):
        sp.gemini(schema)
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- fuzzing

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=12,
)
_KEYWORDS = ("type", "properties", "required", "items", "anyOf", "allOf", "enum", "const",
             "format", "additionalProperties", "$ref", "$defs", "exclusiveMinimum", "nullable",
             "description", "default")
_TYPES = st.sampled_from(["object", "array", "string", "integer", "number", "null"])
_SCHEMAS = st.recursive(
    st.fixed_dictionaries({}, optional={"type": _TYPES | st.lists(_TYPES, max_size=3) | _JSON,
                                        "enum": _JSON, "format": _JSON, "const": _JSON,
                                        "exclusiveMinimum": _JSON, "$ref": st.just("#/$defs/D")}),
    lambda inner: st.dictionaries(st.sampled_from(_KEYWORDS), inner | _JSON, max_size=4)
    | st.fixed_dictionaries({"type": st.just("object"),
                             "properties": st.dictionaries(st.text(max_size=3), inner | _JSON,
                                                           max_size=3)},
                            optional={"required": _JSON | st.lists(st.text(max_size=3)),
                                      "$defs": st.dictionaries(st.just("D"), inner | _JSON)})
    | st.fixed_dictionaries({"anyOf": st.lists(inner | _JSON, max_size=3)}),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None)
@given(schema=_SCHEMAS | _JSON)
def test_hostile_schemas_give_a_schema_or_a_value_error(schema: Any) -> None:
    for profile in PROFILES.values():
        try:
            out = profile(schema)
        except ValueError:
            continue
        assert isinstance(out, dict)


@settings(max_examples=300, deadline=None)
@given(schema=_SCHEMAS, args=_JSON)
def test_the_inverse_of_hostile_schemas_gives_arguments_or_a_value_error(schema: Any,
                                                                         args: Any) -> None:
    try:
        back = sp.openai_args_to_neutral("t", args, schema)
    except ValueError:
        return
    assert isinstance(back, dict)
