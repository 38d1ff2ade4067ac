"""The Codex CLI (``@openai/codex``, pinned in ``agent-clis/``) as ``codex exec --json``.

Flags, and why:

- ``exec --json``: non-interactive, one JSON event a line (``thread.started``, ``turn.started``,
  ``item.started`` / ``item.completed`` for commands, file changes, messages, MCP calls,
  ``turn.completed`` with the turn's usage, ``turn.failed``);
- ``--ephemeral``: no session files; ``--ignore-user-config``: no ``$CODEX_HOME/config.toml``
  (the home is private and empty anyway); ``--ignore-rules``: no user or project execpolicy
  ``.rules``; the project is never trusted (no ``--trust``, no trust entry in the private
  home), so the repository's ``.codex/config.toml`` (its MCP servers, hooks, shell environment
  policy, model provider) is not loaded;
- the model provider is given on the command line (``-c model_provider=studio`` with its
  ``base_url`` the harness's model proxy and ``env_key=OPENAI_API_KEY``, Responses over SSE), so
  nothing in a configuration file can redirect it; ``OPENAI_API_KEY`` holds this execution's
  token, the deployment's key (and ``OPENAI_BASE_URL``) stay in the proxy (:mod:`.keyproxy`);
- ``shell_environment_policy.inherit=core``: commands the model runs do not get the key;
- the final-answer instructions (the :class:`AgentResult` JSON) follow the task in the prompt;
- under bubblewrap, ``--dangerously-bypass-approvals-and-sandbox``: the harness's sandbox
  confines the whole CLI (Codex's own sandbox cannot nest in it); unconfined (development),
  ``--sandbox workspace-write`` with approvals never asked for in ``exec``.

Codex has no turn or budget option: the harness counts its actions and prices its usage (reported
once per turn, at ``turn.completed``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from services.execution.legacy.cli import (
    CliRequest,
    CliToolCall,
    Item,
    ModelTurn,
    SessionEnd,
    ToolOutput,
    UsageReport,
)
from services.execution.legacy.keyproxy import ModelRoute
from services.execution.messages import Usage, UsageSemantic

ALLOWED_ENV = frozenset({"LANG", "LC_ALL", "TZ"})
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: The Responses API (and the model list), below the base URL: all the CLI's model calls.
MODEL_PATHS = (r"/responses(/compact)?", r"/models")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
INSTRUCTIONS = (
    "Work only inside the current directory. Do not commit, push or open pull requests: the "
    "harness does that. When the work is done (or cannot be done), answer with one JSON object "
    'and nothing else: {"status": "success" | "partial" | "failed" | "blocked", "summary": '
    '"...", "changes": ["..."], "issues": ["..."], "questions": []}'
)
TOOL_ITEMS = ("command_execution", "mcp_tool_call", "web_search")


class CodexCli:
    """Argv, environment and stream parser of ``codex exec --json``."""

    home_dirs: tuple[str, ...] = (".codex",)
    hidden: tuple[str, ...] = ()
    name = "codex"
    provider = "codex"

    def __init__(self, executable: Path, environ: Mapping[str, str]) -> None:
        self.executable = executable
        self.environ = dict(environ)

    def home_files(self, request: CliRequest) -> dict[str, str]:
        return {}

    def model_route(self) -> ModelRoute:
        return ModelRoute(self.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                          "authorization", f"Bearer {self.environ.get('OPENAI_API_KEY', '')}",
                          MODEL_PATHS)

    def readable(self) -> list[Path]:
        # bin/codex.js and the platform package with the native binary, under node_modules
        real = Path(os.path.realpath(self.executable))
        for parent in real.parents:
            if parent.name == "node_modules":
                return [parent]
        return [real.parent]

    def argv(self, request: CliRequest, *, sandboxed: bool) -> list[str]:
        provider = (f'{{name="studio", base_url={json.dumps(request.endpoint)}, '
                    'env_key="OPENAI_API_KEY", wire_api="responses"}')
        confinement = (["--dangerously-bypass-approvals-and-sandbox"] if sandboxed
                       else ["--sandbox", "workspace-write"])
        return [
            str(self.executable), "exec", "--json", "--ephemeral", "--ignore-user-config",
            "--ignore-rules", *confinement, "--model", request.model,
            "-c", 'model_provider="studio"', "-c", f"model_providers.studio={provider}",
            "-c", 'shell_environment_policy.inherit="core"',
            f"{request.prompt}\n\n{INSTRUCTIONS}",
        ]

    def env(self, request: CliRequest) -> dict[str, str]:
        env = {k: v for k, v in self.environ.items() if k in ALLOWED_ENV}
        env["PATH"] = SYSTEM_PATH  # node from the system
        env["HOME"] = str(request.home)
        env["CODEX_HOME"] = str(request.home / ".codex")
        env["OPENAI_API_KEY"] = request.token
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def parse(self, line: str) -> list[Item]:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ValueError("not a codex JSON event")
        kind = data["type"]
        item = data.get("item")
        if kind == "item.started" and isinstance(item, dict) and item.get("type") in TOOL_ITEMS:
            return [_call(item)]
        if kind == "item.completed" and isinstance(item, dict):
            return _completed(item)
        if kind == "turn.completed":
            usage = data.get("usage") or {}
            return [UsageReport(Usage(
                input_tokens=int(usage.get("input_tokens") or 0),
                output_tokens=int(usage.get("output_tokens") or 0),
                cached_input_tokens=int(usage.get("cached_input_tokens") or 0),
                semantic=UsageSemantic.DELTA)), SessionEnd(subtype="success", final_text="")]
        if kind == "turn.failed":
            error = data.get("error") or {}
            return [SessionEnd(subtype="error_during_execution", final_text="",
                               details={"error": error.get("message")})]
        return []  # thread.started, turn.started, reconnect notices


def _arguments(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") == "command_execution":
        return {"command": item.get("command")}
    if item.get("type") == "file_change":
        return {"changes": item.get("changes")}
    if item.get("type") == "mcp_tool_call":
        return {"server": item.get("server"), "tool": item.get("tool"),
                "arguments": item.get("arguments")}
    return {k: v for k, v in item.items() if k not in ("id", "type", "status")}


def _call(item: dict[str, Any]) -> ModelTurn:
    name = str(item.get("type"))
    return ModelTurn(str(item.get("id")), "", "",
                     [CliToolCall(str(item.get("id")), name, _arguments(item))], None)


def _completed(item: dict[str, Any]) -> list[Item]:
    kind = item.get("type")
    item_id = str(item.get("id"))
    failed = item.get("status") in ("failed", "declined")
    if kind == "agent_message":
        return [ModelTurn(item_id, "", str(item.get("text", "")), [], None)]
    if kind == "command_execution":
        output = f"{item.get('aggregated_output', '')}\n[exit code {item.get('exit_code')}]"
        return [ToolOutput(item_id, output, failed)]
    if kind == "file_change":
        return [_call(item), ToolOutput(item_id, json.dumps(item.get("changes")), failed)]
    if kind in TOOL_ITEMS:
        return [ToolOutput(item_id, json.dumps(item.get("result") or item.get("error")),
                           failed)]
    return []  # reasoning, todo lists, non-fatal error notices
