"""The workspace tool domain: read, write, move, search and patch files inside the root.

:mod:`~services.execution.tool_domains.workspace.tools` declares the tools; the other modules
are their parts (``io``, ``files``, ``moves``, ``patch``, ``regex``, ``tree``). May import the
engine's core modules (``confinement``, ``errors``) and the shared tool-domain modules
(``context``, ``spec``); never the git or command domains.
"""
