"""Provider adapters: the model APIs behind the loop, one module per wire format.

Start at :mod:`.profiles`: one profile per provider (default model, tool schema, capabilities, how
its adapter is built) is the whole of what is special about it. The adapters: ``codex``
(``codex_wire``), ``gemini`` (``gemini_wire``), ``claude`` (``claude_env``, ``claude_errors``,
``claude_tools``: the Claude Agent SDK runs its own loop) and ``replay``; shared by them:
``common``, ``failures`` and ``schema_profiles`` (the JSON Schema walker with a hook per vendor).
``capabilities`` is the matrix view of the profiles.

May import: the engine's ``messages``, ``ports`` and ``errors``, ``pydantic``, ``anyio``, and the
provider SDKs, each in its adapter only (``openai`` in ``codex``, ``google-genai`` and ``httpx2`` in
``gemini``, ``claude-agent-sdk`` and ``mcp`` in the ``claude`` modules; the profiles import an
adapter when they build it). Not the tool domains or the sandbox.
"""
