"""The default registry: every operation of the workspace, git and command domains."""

from __future__ import annotations

from services.execution.tool_domains import command, git, workspace
from services.execution.tool_domains.dispatch import ToolRegistry


def default_registry() -> ToolRegistry:
    return ToolRegistry([*workspace.SPECS, *git.SPECS, *command.SPECS])
