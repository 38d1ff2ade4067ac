"""How an operation is declared: its argument model, its handler and its neutral JSON Schema."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from services.execution.messages import provider_tool_name
from services.execution.tool_domains.context import ToolDomainContext

JSON_SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


class ToolArgs(BaseModel):
    """Base of every argument model: unknown keys are refused."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


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
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        schema["additionalProperties"] = False
        schema.setdefault("properties", {})
        return schema

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "domain": self.domain,
            "operation": self.operation,
            "description": self.description,
            "parameters": self.neutral_schema(),
        }
