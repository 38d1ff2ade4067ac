"""The git tool domain: status, diff, commit, branch and remote operations inside the root.

:mod:`~services.execution.tool_domains.git.tools` declares the tools;
:mod:`~services.execution.tool_domains.git.runner` runs git itself (also used by the harness,
outside any tool call); ``args``, ``parse``, ``redact`` and ``remote`` are the tools' parts. May
import the engine's core modules and the shared tool-domain modules; never the workspace or
command domains.
"""
