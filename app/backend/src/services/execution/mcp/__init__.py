"""MCP servers as tools for every provider.

:mod:`~services.execution.mcp.config` validates the server configuration file,
:mod:`~services.execution.mcp.bridge` connects the servers and offers their tools in the tool
registry, :mod:`~services.execution.mcp.results` turns their results into tool envelopes.

May import the engine's core modules and :mod:`services.execution.tool_domains` (the registry and
spec types); never the providers or the sandbox.
"""
