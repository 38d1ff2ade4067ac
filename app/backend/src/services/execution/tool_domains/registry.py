"""The default registry: every operation of the workspace, git and command domains."""

from __future__ import annotations

from services.execution.tool_domains.command import tools as command
from services.execution.tool_domains.dispatch import ToolRegistry
from services.execution.tool_domains.git import tools as git
from services.execution.tool_domains.workspace import tools as workspace


def default_registry() -> ToolRegistry:
    return ToolRegistry([*workspace.SPECS, *git.SPECS, *command.SPECS])


def warm_schemas() -> None:
    """Build every default operation's argument model and neutral schema (their models defer
    it to their first use): a worker's fork server does it once for all of its children."""
    for spec in default_registry().specs():
        spec.neutral_schema()
