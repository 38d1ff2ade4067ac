"""One :class:`~services.execution.agent_profile.AgentProfile` from the fields a caller gave.

Every surface (a flowchart agent node, ``POST /api/executions``, ``studio run``) checks its
fields here, so each refuses the same values with the same codes: ``unknown_role``,
``system_prompt_too_long``, ``invalid_system_prompt``, ``invalid_mcp_servers``,
``duplicate_mcp_server``, ``invalid_models`` (:class:`ProfileError`). Whether a named MCP
server is stored is a question for the database (``services.runs.agent_setup``).
"""

from __future__ import annotations

from collections.abc import Sequence

from services.execution.agent_profile import (
    AgentProfile,
    check_mcp_server_names,
    check_primary,
    check_system_prompt,
    parse_models,
)
from services.execution.mcp.config import SERVER_NAME_PATTERN
from services.execution.providers.profiles import PROVIDERS
from services.execution.roles import check_role


def agent_profile(provider: str, model: str | None, *, role: str | None = None,
                  system_prompt: str | None = None, mcp_servers: Sequence[str] | None = None,
                  models: Sequence[object] | None = None) -> AgentProfile:
    """The checked profile; ``models[0]`` must be ``provider`` (and ``model`` when named)."""
    chain = parse_models(models, PROVIDERS)
    check_primary(chain, provider, model)
    return AgentProfile(role=check_role(role), system_prompt=check_system_prompt(system_prompt),
                        mcp_servers=check_mcp_server_names(mcp_servers, SERVER_NAME_PATTERN),
                        models=chain)
