"""Neutral message types shared by every provider adapter, the loop and the tool domains.

Everything here round-trips through JSON (``model_dump(mode="json")`` / ``model_validate``).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TOOL_NAME_PATTERN = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class ToolCall(BaseModel):
    """One tool call, normalized: the provider-facing ``tool_name`` is ``<domain>_<operation>``."""

    model_config = ConfigDict(frozen=True)

    call_id: str
    tool_name: str
    domain: str
    operation: str
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def dotted_name(self) -> str:
        """The name as the CLI and the docs spell it: ``<domain>.<operation>``."""
        return f"{self.domain}.{self.operation}"
