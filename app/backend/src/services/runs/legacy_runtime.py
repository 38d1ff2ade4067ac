"""Which runtime an execution runs on, and the legacy one wired for a run.

The agent runtime cutover (``agent_runtime_cutover_enabled``: a flowchart node's
``__agent_runtime_cutover_enabled`` wins, then the runtime setting, then the default) is read
once, when the execution is recorded: on, the SDK tool loop (FrontierAgent, runtime ``agent``);
off, the provider's own agent CLI (runtime ``legacy``, :mod:`services.execution.legacy`). The
choice and its reason (the setting, its value, the level it came from) are stored on the row
(``runtime`` and ``settings_snapshot["runtime"]``) and shown by ``studio executions show``.
The choice itself is :mod:`services.runs.runtime_choice` (which does not import the CLIs'
adapters nor the engine: recording an execution needs only it).

:func:`run_legacy` is the legacy counterpart of :func:`services.runs.loop.run_loop`: same
inputs, same wiring (journal, tool-call store with its checkpoints, run control, budgets), the
CLI's private home under the data directory (secrets redacted from it afterwards).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from services.db.redaction import Redactor
from services.execution.errors import ConfigError
from services.execution.legacy.claude_code import ClaudeCodeCli
from services.execution.legacy.cli import CliAdapter
from services.execution.legacy.codex_cli import CodexCli
from services.execution.legacy.gemini_cli import GeminiCli
from services.execution.legacy.runner import LegacyDeps, LegacyRunner
from services.execution.outcomes import RunResult
from services.execution.ports import EventSink
from services.execution.pricing import PriceTable
from services.execution.providers.claude_env import bundled_cli_path
from services.execution.providers.cloud_auth import auth_mode
from services.execution.providers.profiles import legacy_refusal as legacy_refusal
from services.execution.providers.profiles import model_or_default
from services.execution.sinks import FanOutSink, LogSink
from services.execution.tool_domains.context import ToolDomainContext
from services.runs.loop import LoopInputs, LoopWiring, RedactingSink, redact_files
from services.settings import StudioSettings, process_environment

PROJECT_ROOT = Path(__file__).resolve().parents[5]  # app/backend/src/services/runs/...


def _claude(settings: StudioSettings, environ: Mapping[str, str]) -> CliAdapter:
    return ClaudeCodeCli(settings.legacy_claude_cli or bundled_cli_path(), environ,
                         auth_mode("claude", settings.claude_auth.value))


def npm_cli_dir(settings: StudioSettings) -> Path:
    """Where the npm-installed agent CLIs are (``STUDIO_LEGACY_CLI_DIR``, else the project's
    ``agent-clis/node_modules/.bin``)."""
    if settings.legacy_cli_dir is not None:
        return settings.legacy_cli_dir
    return PROJECT_ROOT / "agent-clis" / "node_modules" / ".bin"


def _npm_cli(settings: StudioSettings, name: str) -> Path:
    path = npm_cli_dir(settings) / name
    if not os.access(path, os.X_OK):
        raise ConfigError(f"the {name} CLI of the legacy runtime is not installed at {path} "
                          "(bash scripts/setup.sh installs it; STUDIO_LEGACY_CLI_DIR names "
                          "another directory)")
    return path


def _codex(settings: StudioSettings, environ: Mapping[str, str]) -> CliAdapter:
    return CodexCli(_npm_cli(settings, "codex"), environ)


def _gemini(settings: StudioSettings, environ: Mapping[str, str]) -> CliAdapter:
    return GeminiCli(_npm_cli(settings, "gemini"), environ)


#: The agent CLI of each provider that has one in the legacy runtime.
LEGACY_CLIS: Mapping[str, Callable[[StudioSettings, Mapping[str, str]], CliAdapter]] = {
    "claude": _claude, "codex": _codex, "gemini": _gemini}


def cli_home(settings: StudioSettings, execution_id: str) -> Path:
    """The CLI's private home (its own state) for one execution."""
    return settings.data_dir / "legacy" / execution_id / "home"


def run_legacy(settings: StudioSettings, inputs: LoopInputs, ctx: ToolDomainContext,
               wiring: LoopWiring, sinks: Sequence[EventSink], redactor: Redactor,
               environ: Mapping[str, str] | None = None) -> RunResult:
    """Run the provider's agent CLI once in ``inputs.workspace`` (see the module docstring)."""
    refusal = legacy_refusal(inputs.provider)
    if refusal is not None:
        raise refusal
    cli = LEGACY_CLIS[inputs.provider](settings, environ if environ is not None
                                       else process_environment())
    home = cli_home(settings, inputs.execution_id)
    shutil.rmtree(home, ignore_errors=True)  # a retry starts the CLI afresh
    deps = LegacyDeps(
        ctx=ctx, store=wiring.store, limits=wiring.limits, control=wiring.control,
        budget=wiring.budget, refresh_limits=wiring.refresh_limits, spent=wiring.spent,
        prices=PriceTable(settings.model_prices),  # STUDIO_MODEL_PRICES, as the loop
        sink=FanOutSink([wiring.journal, *(RedactingSink(s, redactor) for s in [
            *sinks, LogSink(inputs.provider, ctx.request_id, ctx.correlation_id)])]))
    model = model_or_default(inputs.provider, inputs.model)
    try:
        return LegacyRunner(cli, model, home, deps).run(inputs.prompt)
    finally:
        redact_files(home, redactor)
