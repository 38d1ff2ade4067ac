"""The scripted model server's wire checks: tool schemas per vendor, credentials, tool names."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.model_checks import (
    assert_no_credential_outside_auth,
    check_tool_schema,
    invalid_tool_names,
)
from tests.support.model_requests import RequestRecord

STRICT = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "options": {"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"], "additionalProperties": False},
    },
    "required": ["path", "options"],
    "additionalProperties": False,
}


def record(body: Any, *, vendor: str = "openai", api: str = "responses", query: str = "",
           headers: dict[str, str] | None = None) -> RequestRecord:
    raw = json.dumps(body).encode()
    return RequestRecord(vendor, api, "POST", "/v1/x", query, headers or {}, raw, body)


def test_openai_strict_accepts_a_strict_schema() -> None:
    assert check_tool_schema("openai", STRICT) == []


@pytest.mark.parametrize(("schema", "problem"), [
    ({**STRICT, "additionalProperties": True}, "$: additionalProperties must be false"),
    ({**STRICT, "required": ["path"]}, "$: properties missing from required: ['options']"),
    ({**STRICT, "properties": {**STRICT["properties"], "options": {  # type: ignore[dict-item]
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}},
     "$.properties.options: additionalProperties must be false"),
    ({"type": "array", "items": {"type": "string"}}, "$: the root must have type 'object'"),
])
def test_openai_strict_names_each_problem(schema: dict[str, Any], problem: str) -> None:
    assert problem in check_tool_schema("openai", schema)


def test_gemini_subset_refuses_what_the_api_refuses() -> None:
    schema = {
        "type": "object", "additionalProperties": False, "$defs": {"A": {"type": "string"}},
        "properties": {
            "n": {"type": "integer", "exclusiveMinimum": 0},
            "kind": {"const": "x"},
            "maybe": {"type": ["string", "null"]},
            "ref": {"$ref": "#/$defs/A"},
        },
    }
    problems = check_tool_schema("gemini", schema)
    for expected in ("$: additionalProperties is not supported by Gemini",
                     "$: $defs is not supported by Gemini",
                     "$.properties.n: exclusiveMinimum is not supported by Gemini",
                     "$.properties.kind: const is not supported by Gemini",
                     "$.properties.maybe: type must be a single type (use nullable)",
                     "$.properties.ref: $ref is not supported by Gemini"):
        assert expected in problems


def test_gemini_subset_accepts_a_plain_schema() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string", "nullable": True},
                                               "days": {"type": "integer", "minimum": 1}},
              "required": ["city"]}
    assert check_tool_schema("gemini", schema) == []


def test_anthropic_wants_an_object_input_schema() -> None:
    assert check_tool_schema("anthropic", {"type": "object", "properties": {}}) == []
    assert check_tool_schema("anthropic", {"type": "string"}) != []
    assert check_tool_schema("anthropic", None) != []


def test_unknown_vendor_is_a_developer_error() -> None:
    with pytest.raises(ValueError, match="unknown vendor"):
        check_tool_schema("mistral", STRICT)


def test_credential_check_passes_when_only_in_the_auth_header() -> None:
    clean = record({"input": "hi"}, headers={"authorization": "Bearer sk-1"})
    assert_no_credential_outside_auth(clean, "sk-1")


@pytest.mark.parametrize("leaky", [
    record({"input": "hi"}, query="key=sk-1", headers={"x-goog-api-key": "sk-1"}),
    record({"input": "my key is sk-1"}, headers={"authorization": "Bearer sk-1"}),
    record({}, headers={"authorization": "Bearer sk-1", "x-debug": "sk-1"}),
    record({}, headers={}),
])
def test_credential_check_fails_on_a_leak_or_a_missing_auth_header(leaky: RequestRecord) -> None:
    with pytest.raises(AssertionError):
        assert_no_credential_outside_auth(leaky, "sk-1")


def test_tool_names_outside_the_portable_pattern_are_reported() -> None:
    tools = [{"type": "function", "name": n, "parameters": STRICT}
             for n in ("workspace_read_file", "workspace.read_file", "x" * 65, "git-status")]
    assert invalid_tool_names(record({"tools": tools})) == ["workspace.read_file", "x" * 65]
