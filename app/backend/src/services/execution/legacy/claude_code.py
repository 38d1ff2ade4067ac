"""The Claude Code CLI (bundled in the claude-agent-sdk wheel) in print mode, stream-JSON out.

Flags, and why:

- ``-p PROMPT --output-format stream-json --verbose``: non-interactive, one JSON object a line;
- ``--setting-sources ""``: no user, project or local settings file is read, so the repository's
  ``.claude/settings.json`` (hooks, permissions, environment, MCP servers) and
  ``.claude/settings.local.json`` never apply; ``--strict-mcp-config`` with no ``--mcp-config``:
  no MCP server at all (``.mcp.json`` included); ``--disable-slash-commands``: no skills or
  commands from ``.claude/commands``;
- ``--tools`` and ``--allowedTools`` name the only built-in tools (read, edit, write, search,
  Bash); ``--permission-mode acceptEdits``: edits need no approval, anything else outside the
  allow list is denied, nobody is asked;
- ``--max-turns`` and ``--max-budget-usd``: the CLI stops itself (``error_max_turns``,
  ``error_max_budget_usd``); the harness checks both from the stream as well;
- ``--no-session-persistence``: nothing to resume is left behind;
- ``--append-system-prompt``: the final answer as the JSON :class:`AgentResult`.

Environment: the base URL of the harness's model proxy and this execution's token as
``ANTHROPIC_API_KEY`` (``ANTHROPIC_AUTH_TOKEN`` when the deployment uses an auth token), the
switches that stop its non-essential traffic, a private ``HOME`` and ``CLAUDE_CONFIG_DIR`` under
it; the deployment's key stays in the proxy (:mod:`.keyproxy`). Only the API-key auth mode runs
here: the cloud modes (Bedrock, Vertex, ...) sign each request with credentials the CLI would have
to hold.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.execution.errors import ErrorCode, ExecutionError
from services.execution.legacy.cli import (
    CliRequest,
    CliToolCall,
    Item,
    ModelTurn,
    SessionEnd,
    ToolOutput,
)
from services.execution.legacy.keyproxy import ModelRoute
from services.execution.messages import Usage, UsageSemantic
from services.execution.providers.claude_env import DEFAULT_PATH, FIXED_ENV
from services.execution.providers.cloud_auth import API_KEY, AuthMode

TOOLS = "Bash,Read,Edit,Write,Glob,Grep"
DEFAULT_BASE_URL = "https://api.anthropic.com"
#: The Messages API, below the base URL: all the CLI's model calls.
MODEL_PATHS = (r"/v1/messages(/count_tokens)?",)
PLAIN_ENV = ("LANG", "LC_ALL", "TZ")
RESULT_INSTRUCTIONS = (
    "Work only inside the current directory. Do not commit, push or open pull requests: the "
    "harness does that. When the work is done (or cannot be done), answer with one JSON object "
    'and nothing else: {"status": "success" | "partial" | "failed" | "blocked", "summary": '
    '"...", "changes": ["..."], "issues": ["..."], "questions": []}'
)


class ClaudeCodeCli:
    """Argv, environment and stream parser of the Claude Code CLI."""

    home_dirs: tuple[str, ...] = (".claude",)
    hidden: tuple[str, ...] = ()
    name = "claude-code"
    provider = "claude"

    def __init__(self, executable: Path, environ: Mapping[str, str],
                 auth_mode: AuthMode | None = None) -> None:
        self.executable = executable
        self.environ = dict(environ)
        self.auth_mode = auth_mode  # STUDIO_CLAUDE_AUTH (None: the API key)

    def home_files(self, request: CliRequest) -> dict[str, str]:
        return {}

    def _uses_auth_token(self) -> bool:
        return not self.environ.get("ANTHROPIC_API_KEY") \
            and bool(self.environ.get("ANTHROPIC_AUTH_TOKEN"))

    def model_route(self) -> ModelRoute:
        if self.auth_mode is not None and self.auth_mode.name != API_KEY:
            raise ExecutionError(
                f"the legacy runtime runs Claude Code with the API key only (STUDIO_CLAUDE_AUTH="
                f"{self.auth_mode.name} signs requests with credentials the CLI would hold)",
                code=ErrorCode.UNSUPPORTED_CAPABILITY)
        upstream = self.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        if self._uses_auth_token():
            return ModelRoute(upstream, "authorization",
                              f"Bearer {self.environ['ANTHROPIC_AUTH_TOKEN']}", MODEL_PATHS)
        return ModelRoute(upstream, "x-api-key", self.environ.get("ANTHROPIC_API_KEY", ""),
                          MODEL_PATHS)

    def readable(self) -> list[Path]:
        return [Path(os.path.realpath(self.executable)).parent]

    def argv(self, request: CliRequest, *, sandboxed: bool) -> list[str]:
        return [
            str(self.executable), "-p", request.prompt,
            "--output-format", "stream-json", "--verbose",
            "--model", request.model,
            "--max-turns", str(request.max_turns),
            "--max-budget-usd", f"{request.max_budget_usd:.4f}",
            "--setting-sources", "", "--strict-mcp-config", "--disable-slash-commands",
            "--tools", TOOLS, "--allowedTools", TOOLS, "--permission-mode", "acceptEdits",
            "--no-session-persistence",
            "--append-system-prompt", RESULT_INSTRUCTIONS,
        ]

    def env(self, request: CliRequest) -> dict[str, str]:
        env = {k: v for k, v in self.environ.items() if k in PLAIN_ENV}
        env.update(FIXED_ENV)
        env["PATH"] = self.environ.get("PATH") or DEFAULT_PATH
        env["ANTHROPIC_BASE_URL"] = request.endpoint
        env["ANTHROPIC_AUTH_TOKEN" if self._uses_auth_token() else "ANTHROPIC_API_KEY"] = \
            request.token
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        env["HOME"] = str(request.home)
        env["CLAUDE_CONFIG_DIR"] = str(request.home / ".claude")
        return env

    def parse(self, line: str) -> list[Item]:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ValueError("not a stream-JSON event")
        kind = data["type"]
        if kind == "assistant":
            return [_turn(data.get("message") or {})]
        if kind == "user":
            return _tool_outputs(data.get("message") or {})
        if kind == "result":
            return [SessionEnd(
                subtype=str(data.get("subtype", "")), final_text=str(data.get("result") or ""),
                turns=data.get("num_turns"), reported_cost_usd=data.get("total_cost_usd"),
                details={"is_error": data.get("is_error"), "errors": data.get("errors")})]
        return []  # system init, stream events, status lines


def _turn(message: dict[str, Any]) -> ModelTurn:
    texts: list[str] = []
    calls: list[CliToolCall] = []
    for block in message.get("content") or []:
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_use":
            calls.append(CliToolCall(str(block.get("id")), str(block.get("name")),
                                     dict(block.get("input") or {})))
    raw = message.get("usage") or None
    usage = None
    if isinstance(raw, dict):
        usage = Usage(input_tokens=int(raw.get("input_tokens") or 0)
                      + int(raw.get("cache_creation_input_tokens") or 0),
                      output_tokens=int(raw.get("output_tokens") or 0),
                      cached_input_tokens=int(raw.get("cache_read_input_tokens") or 0),
                      semantic=UsageSemantic.DELTA)
    return ModelTurn(str(message.get("id", "")), str(message.get("model", "")),
                     "".join(texts), calls, usage)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return json.dumps(content)


def _tool_outputs(message: dict[str, Any]) -> list[Item]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [ToolOutput(str(b.get("tool_use_id")), _content_text(b.get("content")),
                       bool(b.get("is_error")))
            for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
