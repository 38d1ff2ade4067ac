"""How an operation is declared: its argument model, its handler and its neutral JSON Schema."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict

from services.execution.messages import provider_tool_name
from services.execution.tool_domains.context import ToolDomainContext

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class ToolArgs(BaseModel):
    """Base of every argument model: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


@cache
def model_schema(args_model: type[ToolArgs]) -> dict[str, Any]:
    """The neutral JSON Schema of ``args_model``, made once per process (and once per worker:
    its fork server makes those of the default tools, :func:`warm_schemas`, so that no forked
    execution builds the deferred models and their schemas again, about 5 MB of pages each
    would copy, :doc:`benchmarks`). Callers get a copy (:meth:`ToolSpec.neutral_schema`)."""
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    schema["additionalProperties"] = False
    schema.setdefault("properties", {})
    return schema


Handler = Callable[[Any, ToolDomainContext], dict[str, Any]]


@dataclass(frozen=True)
class ToolSpec:
    """One operation of one domain."""

    domain: str
    operation: str
    description: str
    args_model: type[ToolArgs]
    handler: Handler
    mutates: bool = False
    parameters: dict[str, Any] | None = None  # a foreign schema (MCP tools) instead of the model's

    @property
    def name(self) -> str:
        """Provider-facing name, ``<domain>_<operation>`` (``mcp__<server>__<tool>`` for MCP)."""
        return provider_tool_name(self.dotted_name)

    @property
    def dotted_name(self) -> str:
        return f"{self.domain}.{self.operation}"

    def neutral_schema(self) -> dict[str, Any]:
        """The provider-neutral JSON Schema (2020-12) of the arguments."""
        if self.parameters is not None:
            return dict(self.parameters)
        return copy.deepcopy(model_schema(self.args_model))

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "domain": self.domain,
            "operation": self.operation,
            "description": self.description,
            "parameters": self.neutral_schema(),
        }
