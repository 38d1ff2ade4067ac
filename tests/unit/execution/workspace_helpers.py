"""A caller of the workspace tools through the real dispatcher, for the workspace-domain tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.workspace import tools as workspace


class Workspace:
    """Calls workspace tools on ``root`` and answers with the envelope as JSON data."""

    def __init__(self, root: Path, allow_workflows: bool = False) -> None:
        self.root = root
        self.dispatcher = Dispatcher(ToolRegistry(workspace.SPECS))
        self.ctx = ToolDomainContext(workspace_root=root, execution_id="exec-ws",
                                     request_id="req", correlation_id="corr",
                                     allow_workflow_changes=allow_workflows)
        self.count = 0

    def envelope(self, operation: str, **args: Any) -> dict[str, Any]:
        self.count += 1
        call = self.dispatcher.normalize(f"c{self.count}", f"workspace_{operation}", args)
        return self.dispatcher.dispatch(call, self.ctx).model_dump(mode="json")

    def ok(self, operation: str, **args: Any) -> dict[str, Any]:
        envelope = self.envelope(operation, **args)
        assert envelope["ok"], envelope
        result: dict[str, Any] = envelope["result"]
        return result

    def error(self, operation: str, **args: Any) -> str:
        envelope = self.envelope(operation, **args)
        assert not envelope["ok"], envelope
        code: str = envelope["error"]["code"]
        return code
