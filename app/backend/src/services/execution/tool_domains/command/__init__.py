"""The command tool domain: run one program in the workspace, inside the chosen sandbox.

:mod:`~services.execution.tool_domains.command.tools` declares the tool;
:mod:`~services.execution.tool_domains.command.process` starts the prepared command and collects
its output. May import the engine's core modules (``ports`` for the sandbox Protocol) and the
shared tool-domain modules; never the sandbox implementation or the other domains.
"""
