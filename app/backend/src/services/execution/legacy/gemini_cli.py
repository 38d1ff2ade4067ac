"""The Gemini CLI (``@google/gemini-cli``, pinned in ``agent-clis/``) headless, stream-JSON out.

Flags and files, and why:

- ``-p PROMPT -o stream-json``: non-interactive, one JSON event a line (``init``, ``message``
  deltas, ``tool_use``, ``tool_result``, ``result`` with the session's token counts);
- ``--approval-mode yolo --skip-trust``: no one is asked; tools run inside the harness's sandbox
  (the CLI's own ``--sandbox`` stays off);
- the repository's ``.gemini/`` (``settings.json`` with ``mcpServers``, ``tools.discoveryCommand``
  and ``tools.callCommand``, hooks, extensions, policies) is **kept out of the CLI's view**: the
  CLI has no switch that ignores workspace settings in a trusted session, so the harness mounts
  an empty read-only directory over it (:attr:`GeminiCli.hidden`; bubblewrap only, the runtime
  refuses gemini unconfined);
- the user settings in the private home name the API-key auth, turn telemetry, usage statistics
  and update checks off, cap the session's turns (``model.maxSessionTurns``) and set
  ``advanced.ignoreLocalEnv``: in a trusted session the CLI otherwise loads the first ``.env`` of
  the working directory or a parent and sets every variable the environment left unset (a
  repository's ``GOOGLE_GEMINI_BASE_URL``, ``HTTPS_PROXY``, ``GOOGLE_API_KEY`` ...). With the
  setting (read in ``loadEnvironment`` of the pinned 0.61.0) only the home's ``.env`` counts, and
  the home is private; the harness also sets the variables that route or authenticate the
  model's calls itself (an empty value is set, so no file fills it);
- ``GEMINI_API_KEY`` holds this execution's token and ``GOOGLE_GEMINI_BASE_URL`` the harness's
  model proxy: the deployment's key never reaches the CLI (:mod:`.keyproxy`).

``GEMINI.md`` is still read as instructions (it runs nothing). Usage is reported once, in the
``result`` event: the harness prices it then.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

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
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
#: generateContent and its kin, below the base URL: all the CLI's model calls.
MODEL_PATHS = (r"/v1(alpha|beta)?/models/[A-Za-z0-9._-]+:"
               r"(streamGenerateContent|generateContent|countTokens)",)
#: Variables the CLI reads that route or authenticate its model calls, or proxy them: set by
#: the harness (empty when unused) so no ``.env`` can fill them.
PINNED_EMPTY = ("GOOGLE_API_KEY", "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_USE_GCA", "GOOGLE_VERTEX_BASE_URL",
                "HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "ALL_PROXY",
                "all_proxy")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
INSTRUCTIONS = (
    "Work only inside the current directory. Do not commit, push or open pull requests: the "
    "harness does that. When the work is done (or cannot be done), answer with one JSON object "
    'and nothing else: {"status": "success" | "partial" | "failed" | "blocked", "summary": '
    '"...", "changes": ["..."], "issues": ["..."], "questions": []}'
)


class GeminiCli:
    """Argv, environment, private settings and stream parser of the Gemini CLI."""

    home_dirs: tuple[str, ...] = (".gemini",)
    hidden: tuple[str, ...] = (".gemini",)
    name = "gemini-cli"
    provider = "gemini"

    def __init__(self, executable: Path, environ: Mapping[str, str]) -> None:
        self.executable = executable
        self.environ = dict(environ)
        self._text = ""
        self._turn = 0
        self._after_result = True

    def model_route(self) -> ModelRoute:
        return ModelRoute(self.environ.get("GOOGLE_GEMINI_BASE_URL") or DEFAULT_BASE_URL,
                          "x-goog-api-key", self.environ.get("GEMINI_API_KEY", ""), MODEL_PATHS)

    def readable(self) -> list[Path]:
        real = Path(os.path.realpath(self.executable))
        for parent in real.parents:
            if parent.name == "node_modules":
                return [parent]
        return [real.parent]

    def home_files(self, request: CliRequest) -> dict[str, str]:
        settings = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False}, "telemetry": {"enabled": False},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "advanced": {"ignoreLocalEnv": True},
            # one more than the harness allows: the harness sees the extra turn and stops the
            # CLI with max_iterations_exceeded; the CLI's own cap is the backstop
            "model": {"maxSessionTurns": request.max_turns + 1},
        }
        return {".gemini/settings.json": json.dumps(settings)}

    def argv(self, request: CliRequest, *, sandboxed: bool) -> list[str]:
        return [str(self.executable), "-p", f"{request.prompt}\n\n{INSTRUCTIONS}",
                "-o", "stream-json", "-m", request.model, "--approval-mode", "yolo",
                "--skip-trust"]

    def env(self, request: CliRequest) -> dict[str, str]:
        env = {k: v for k, v in self.environ.items() if k in ALLOWED_ENV}
        env.update(dict.fromkeys(PINNED_EMPTY, ""))
        env["PATH"] = SYSTEM_PATH  # node from the system
        env["HOME"] = str(request.home)
        env["NO_COLOR"] = "1"
        env["GEMINI_API_KEY"] = request.token
        env["GOOGLE_GEMINI_BASE_URL"] = request.endpoint
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        return env

    def parse(self, line: str) -> list[Item]:
        data = json.loads(line)
        if not isinstance(data, dict) or not isinstance(data.get("type"), str):
            raise ValueError("not a gemini stream-JSON event")
        kind = data["type"]
        if kind == "message" and data.get("role") == "assistant":
            self._text += str(data.get("content", ""))
            return []
        if kind == "tool_use":
            if self._after_result:
                self._turn += 1
                self._after_result = False
            text, self._text = self._text, ""
            call = CliToolCall(str(data.get("tool_id")), str(data.get("tool_name")),
                               dict(data.get("parameters") or {}))
            return [ModelTurn(f"turn-{self._turn}", "", text, [call], None)]
        if kind == "tool_result":
            self._after_result = True
            failed = data.get("status") != "success"
            output = data.get("output")
            if output is None:
                output = json.dumps(data.get("error"))
            return [ToolOutput(str(data.get("tool_id")), str(output), failed)]
        if kind == "result":
            return self._end(data)
        return []  # init, the user's message, non-fatal notices

    def _end(self, data: dict[str, object]) -> list[Item]:
        items: list[Item] = []
        if self._text:
            self._turn += 1
            items.append(ModelTurn(f"turn-{self._turn}", "", self._text, [], None))
        stats = data.get("stats")
        stats = stats if isinstance(stats, dict) else {}
        items.append(UsageReport(Usage(
            input_tokens=int(stats.get("input_tokens") or 0),
            output_tokens=int(stats.get("output_tokens") or 0),
            cached_input_tokens=int(stats.get("cached") or 0), semantic=UsageSemantic.DELTA)))
        ok = data.get("status") == "success"
        items.append(SessionEnd(subtype="success" if ok else "error_during_execution",
                                final_text=self._text,
                                details={} if ok else {"error": data.get("error")}))
        return items
