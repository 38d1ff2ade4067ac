"""Whether a run may start MCP servers, told without a database (what a worker tells its fork
server, which then loads the MCP client once): the deployment's ``STUDIO_MCP_CONFIG`` or stored
servers the agent names; neither, no MCP (the server does not load the client for it)."""

from __future__ import annotations

from pathlib import Path

from services.execution.agent_profile import AgentProfile
from services.runs.agent_setup import may_use_mcp
from tests.support.settings import studio_settings


def test_the_deployments_file_or_the_agents_servers_and_else_none(tmp_path: Path) -> None:
    plain = studio_settings(tmp_path)
    configured = studio_settings(tmp_path, mcp_config=tmp_path / "mcp.json")
    named = AgentProfile(mcp_servers=("docs",))
    assert not may_use_mcp(plain, AgentProfile())
    assert may_use_mcp(plain, named)
    assert may_use_mcp(configured, AgentProfile())
    assert may_use_mcp(configured, named)
