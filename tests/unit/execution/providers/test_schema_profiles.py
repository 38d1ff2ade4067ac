"""Schema profiles: every project tool schema passes each vendor's rules; the inverse is exact."""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest

from services.execution.providers import schema_profiles as sp
from services.execution.tool_domains.registry import default_registry
from services.execution.tool_domains.spec import ToolSpec
from tests.support.model_checks import check_tool_schema

SPECS = default_registry().specs()
ENV_MAP: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {"type": "string"},
        "env": {"type": "object", "additionalProperties": {"type": "string"}, "default": {}},
    },
    "required": ["command"],
    "additionalProperties": False,
}
WITH_REFS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "Mode": {"type": "string", "enum": ["a", "b"], "title": "Mode"},
        "Inner": {
            "type": "object",
            "properties": {"mode": {"$ref": "#/$defs/Mode"}, "count": {
                "type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10}},
            "required": ["mode"],
        },
    },
    "properties": {
        "inner": {"allOf": [{"$ref": "#/$defs/Inner"}], "description": "the inner one"},
        "maybe": {"anyOf": [{"$ref": "#/$defs/Inner"}, {"type": "null"}], "default": None},
        "kind": {"const": "fixed"},
        "level": {"enum": [1, 2, 3]},
        "either": {"type": ["string", "null"]},
        "anything": {"type": "object", "additionalProperties": True},
    },
    "required": ["inner"],
}


def _ids(spec: ToolSpec) -> str:
    return spec.name


def test_registry_has_the_three_domains() -> None:
    assert {s.domain for s in SPECS} >= {"workspace", "git", "command"}


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_openai_strict_profile_of_every_tool(spec: ToolSpec) -> None:
    schema = sp.openai_strict(spec.neutral_schema())
    assert check_tool_schema("openai", schema) == []
    jsonschema.Draft202012Validator.check_schema(schema)
    assert "default" not in repr(schema)


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_gemini_profile_of_every_tool(spec: ToolSpec) -> None:
    schema = sp.gemini(spec.neutral_schema())
    assert check_tool_schema("gemini", schema) == []


@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_anthropic_profile_of_every_tool(spec: ToolSpec) -> None:
    schema = sp.anthropic(spec.neutral_schema())
    assert check_tool_schema("anthropic", schema) == []
    assert "$schema" not in schema


@pytest.mark.parametrize("schema", [ENV_MAP, WITH_REFS], ids=["env-map", "refs"])
def test_profiles_of_sample_schemas_pass_vendor_checks(schema: dict[str, Any]) -> None:
    assert check_tool_schema("openai", sp.openai_strict(schema)) == []
    assert check_tool_schema("gemini", sp.gemini(schema)) == []
    jsonschema.Draft202012Validator.check_schema(sp.openai_strict(schema))


def test_openai_strict_makes_optional_nullable_and_maps_pairs() -> None:
    strict = sp.openai_strict(ENV_MAP)
    assert strict["required"] == ["command", "env"]
    assert strict["properties"]["command"] == {"type": "string"}
    env = strict["properties"]["env"]
    assert env["type"] == ["array", "null"]
    assert env["items"]["properties"]["value"] == {"type": "string"}
    assert env["items"]["required"] == ["name", "value"]


def test_openai_strict_inlines_refs_and_closes_nested_objects() -> None:
    strict = sp.openai_strict(WITH_REFS)
    assert "$defs" not in strict and "$ref" not in repr(strict)
    inner = strict["properties"]["inner"]
    assert inner["description"] == "the inner one"
    assert inner["additionalProperties"] is False
    assert inner["required"] == ["mode", "count"]
    assert inner["properties"]["count"]["type"] == ["integer", "null"]
    assert strict["properties"]["maybe"]["anyOf"][1] == {"type": "null"}
    assert strict["properties"]["level"]["anyOf"][-1] == {"type": "null"}


def test_openai_strict_nullable_enum_admits_null() -> None:
    schema = {"type": "object", "properties": {"m": {"type": "string", "enum": ["x"]}}}
    assert sp.openai_strict(schema)["properties"]["m"] == {
        "type": ["string", "null"], "enum": ["x", None]}


def test_gemini_downlevels_unsupported_keywords() -> None:
    g = sp.gemini(WITH_REFS)
    assert "$schema" not in g and "$defs" not in g
    count = g["properties"]["inner"]["properties"]["count"]
    assert (count["minimum"], count["maximum"]) == (1, 9)
    assert g["properties"]["inner"]["properties"]["mode"] == {"type": "string", "enum": ["a", "b"]}
    assert g["properties"]["maybe"]["nullable"] is True
    assert g["properties"]["maybe"]["type"] == "object"
    assert g["properties"]["kind"]["enum"] == ["fixed"]
    assert "enum" not in g["properties"]["level"]
    assert "One of: 1, 2, 3." in g["properties"]["level"]["description"]
    assert g["properties"]["either"] == {"type": "string", "nullable": True}
    assert g["properties"]["anything"]["type"] == "array"


def test_inverse_turns_pairs_into_maps_and_drops_optional_nulls() -> None:
    sent = {"command": "ls", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": ""}]}
    assert sp.openai_args_to_neutral("command_run", sent, ENV_MAP) == {
        "command": "ls", "env": {"A": "1", "B": ""}}
    assert sp.openai_args_to_neutral("command_run", {"command": "ls", "env": None}, ENV_MAP) == {
        "command": "ls"}


def test_inverse_keeps_null_of_a_required_property_and_bad_shapes() -> None:
    schema = {"type": "object", "properties": {"x": {"type": ["string", "null"]}},
              "required": ["x"]}
    assert sp.openai_args_to_neutral("t", {"x": None}, schema) == {"x": None}
    odd = {"command": "ls", "env": ["A=1"]}
    assert sp.openai_args_to_neutral("command_run", odd, ENV_MAP) == odd


def test_inverse_decodes_json_values_of_open_any_maps() -> None:
    sent = {"inner": {"mode": "a", "count": None},
            "anything": [{"name": "k", "value": "[1, 2]"}, {"name": "s", "value": "plain"}]}
    back = sp.openai_args_to_neutral("t", sent, WITH_REFS)
    assert back == {"inner": {"mode": "a"}, "anything": {"k": [1, 2], "s": "plain"}}


def test_inverse_walks_nullable_nested_objects() -> None:
    sent = {"inner": {"mode": "a", "count": 3}, "maybe": {"mode": "b", "count": None}}
    back = sp.openai_args_to_neutral("t", sent, WITH_REFS)
    assert back["maybe"] == {"mode": "b"}


def test_inverse_refuses_non_objects() -> None:
    with pytest.raises(ValueError, match="command_run"):
        sp.openai_args_to_neutral("command_run", ["ls"], ENV_MAP)


def test_recursive_refs_are_refused() -> None:
    schema = {"$defs": {"N": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}}},
              "type": "object", "properties": {"root": {"$ref": "#/$defs/N"}}}
    with pytest.raises(ValueError, match="recursive"):
        sp.openai_strict(schema)


def test_command_run_round_trip_through_strict_validates_against_the_args_model() -> None:
    spec = next(s for s in SPECS if s.name == "command_run")
    strict = sp.openai_strict(spec.neutral_schema())
    sent: dict[str, Any] = {name: None for name in strict["properties"]}
    sent.update(command="env", env=[{"name": "FOO", "value": "bar"}])
    jsonschema.validate(sent, strict)
    neutral = sp.openai_args_to_neutral(spec.name, sent, spec.neutral_schema())
    assert neutral == {"command": "env", "env": {"FOO": "bar"}}
    jsonschema.validate(neutral, spec.neutral_schema())
    model = spec.args_model.model_validate(neutral)
    assert model.env == {"FOO": "bar"}  # type: ignore[attr-defined]


NO_REQUIRED = [s for s in SPECS if not s.neutral_schema().get("required")]


def test_some_tools_have_no_required_argument() -> None:
    assert len(NO_REQUIRED) >= 3


@pytest.mark.parametrize("spec", NO_REQUIRED, ids=_ids)
def test_all_null_strict_args_become_the_defaults(spec: ToolSpec) -> None:
    """A model that sends null for every optional property gets the argument model's defaults."""
    neutral_schema = spec.neutral_schema()
    strict = sp.openai_strict(neutral_schema)
    sent = {name: None for name in strict["properties"]}
    jsonschema.validate(sent, strict)
    assert sp.openai_args_to_neutral(spec.name, sent, neutral_schema) == {}


def test_the_inverse_inlines_a_schema_once_and_a_new_schema_again() -> None:
    """Each call's arguments go back through the tool's schema with its ``$ref`` inlined: the
    inlined schema is remembered per schema object (what it answers is unchanged)."""
    schema: dict[str, Any] = {
        "type": "object", "$defs": {"Env": {"type": "object",
                                            "additionalProperties": {"type": "string"}}},
        "properties": {"env": {"$ref": "#/$defs/Env"}, "n": {"type": "integer"}},
        "required": ["env"]}
    args = {"env": [{"name": "A", "value": "1"}], "n": None}
    first = sp.openai_args_to_neutral("t", args, schema)
    assert first == {"env": {"A": "1"}}
    assert sp._inlined(schema) is sp._inlined(schema)
    assert sp._inlined(schema) == sp.inline_refs(schema)
    other = {**schema, "required": ["env", "n"]}
    assert sp.openai_args_to_neutral("t", args, other) == {"env": {"A": "1"}, "n": None}
