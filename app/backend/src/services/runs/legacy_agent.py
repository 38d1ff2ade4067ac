"""Agent fields on the legacy runtime are refused (see :func:`legacy_profile_refusal`)."""

from __future__ import annotations

from typing import Any

from services.execution.agent_profile import AgentProfile
from services.execution.errors import ErrorCode, ExecutionError
from services.runs.runtime_choice import LEGACY_RUNTIME, runtime_choice


def legacy_profile_refusal(snapshot: dict[str, Any],
                           profile: AgentProfile) -> ExecutionError | None:
    """An execution on the legacy runtime (the cutover off) runs the provider's own agent CLI,
    which applies none of the agent fields: one that names any is refused
    (``unsupported_capability``) rather than run without them (a reviewer that could write)."""
    if profile == AgentProfile() or runtime_choice(snapshot).runtime != LEGACY_RUNTIME:
        return None
    return ExecutionError("the legacy runtime (agent runtime cutover off) cannot apply role, "
                          "system_prompt, mcp_servers or models; run it with the cutover on",
                          code=ErrorCode.UNSUPPORTED_CAPABILITY)
