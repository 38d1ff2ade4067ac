"""The legacy runtime per provider: its agent CLI, how it is run, where each guard acts.

``studio providers`` prints this next to the SDK loop's matrix
(:mod:`services.execution.providers.capabilities`); the runtime docs page names every row.
A provider without an entry has no agent CLI: cutover off refuses its executions
(``unsupported_capability``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from services.execution.providers.profiles import GUARDS, PROVIDERS

CLI_GUARDS: Mapping[str, str] = {
    "max_iterations": "the CLI's own turn cap, and the harness after each model turn in its "
                      "stream: max_iterations_exceeded",
    "max_budget_usd": "the CLI's own budget option where it has one, and the harness after "
                      "each model turn (price table, delta per message): budget_exceeded",
    "repository_budget": "the harness after each model turn (BudgetPort.check; each turn "
                         "charged)",
    "loop_detection": "none: the CLI feeds its tool results back itself",
    "kill_switch": "the harness, after each model turn and every second while the CLI runs: "
                   "its process group killed",
    "wall_clock": "the harness: the wall clock, and no output for stall_s, kill the process "
                  "group: stalled",
    "provider_retries": "the CLI's own retries",
    "invalid_arguments": "the CLI checks its own tool arguments; its tool errors are recorded "
                         "as legacy_tool_error",
}


@dataclass(frozen=True)
class LegacyCliInfo:
    """One provider's row of the legacy runtime."""

    provider: str
    cli: str
    invocation: str
    installed_by: str
    project_config_off: str
    guards: Mapping[str, str] = field(default_factory=lambda: CLI_GUARDS)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["guards"] = dict(self.guards)
        return data


LEGACY_CLIS: Mapping[str, LegacyCliInfo] = {
    "claude": LegacyCliInfo(
        provider="claude", cli="Claude Code (bundled in claude-agent-sdk)",
        invocation="claude -p --output-format stream-json --verbose --max-turns N "
                   "--max-budget-usd B --permission-mode acceptEdits",
        installed_by="the claude-agent-sdk wheel (requirements lock)",
        project_config_off="--setting-sources '' (no .claude/settings*.json: hooks, "
                           "permissions, env), --strict-mcp-config (no .mcp.json), "
                           "--disable-slash-commands",
    ),
    "codex": LegacyCliInfo(
        provider="codex", cli="Codex CLI (@openai/codex 0.169.0)",
        invocation="codex exec --json --ephemeral --ignore-user-config --ignore-rules "
                   "-c model_provider=studio (base_url from OPENAI_BASE_URL); under "
                   "bubblewrap --dangerously-bypass-approvals-and-sandbox, else --sandbox "
                   "workspace-write",
        installed_by="scripts/setup.sh: npm ci in agent-clis/ (package-lock.json)",
        project_config_off="the project is never trusted, so .codex/config.toml (MCP "
                           "servers, hooks, shell environment, provider) is not loaded; "
                           "--ignore-rules (no .rules); --ignore-user-config",
        guards={**CLI_GUARDS,
                "max_iterations": "the harness, counting the CLI's actions (each tool call "
                                  "and message) in its stream: max_iterations_exceeded",
                "max_budget_usd": "the harness when the CLI reports usage (once per turn, at "
                                  "turn.completed): budget_exceeded"},
    ),
    "gemini": LegacyCliInfo(
        provider="gemini", cli="Gemini CLI (@google/gemini-cli 0.61.0)",
        invocation="gemini -p PROMPT -o stream-json -m M --approval-mode yolo --skip-trust "
                   "(GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY); bubblewrap only",
        installed_by="scripts/setup.sh: npm ci in agent-clis/ (package-lock.json)",
        project_config_off="the repository's .gemini/ (settings.json: mcpServers, "
                           "tools.discoveryCommand/callCommand, hooks, extensions) hidden under "
                           "an empty read-only directory; the CLI cannot ignore it itself",
        guards={**CLI_GUARDS,
                "max_iterations": "the CLI's model.maxSessionTurns (private settings) and the "
                                  "harness counting its tool-call rounds: "
                                  "max_iterations_exceeded",
                "max_budget_usd": "the harness when the CLI reports usage (once, in its "
                                  "result event): budget_exceeded"},
    ),
}


def legacy_matrix() -> list[dict[str, Any]]:
    """Every provider with its legacy CLI, or ``None`` (refused with cutover off)."""
    return [{"provider": name, "legacy": info.as_dict() if info is not None else None}
            for name in PROVIDERS for info in [LEGACY_CLIS.get(name)]]


__all__ = ["CLI_GUARDS", "GUARDS", "LEGACY_CLIS", "LegacyCliInfo", "legacy_matrix"]
