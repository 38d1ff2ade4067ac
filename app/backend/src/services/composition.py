"""Composition root shared by the CLI, the worker and the API: build engines and tool contexts.

This is where deployment settings meet the engine; the engine itself reads no configuration.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from services.execution.errors import ConfigError
from services.execution.ports import CommandSandbox, ModelClient, SelfDrivingEngine
from services.execution.providers.replay import ReplayClient, load_script
from services.execution.sandbox.selection import UNCONFINED_WARNING, CommandLimits, select_sandbox
from services.settings import StudioSettings, is_production, process_environment

PROVIDERS = ("codex", "gemini", "claude", "replay")
DEFAULT_MODELS = {
    "codex": "gpt-5.1",
    "gemini": "gemini-2.5-pro",
    "claude": "claude-sonnet-4-5",
    "replay": "replay",
}


@dataclass(frozen=True)
class EngineRequest:
    provider: str
    model: str | None
    workspace: Path
    run_dir: Path
    transcript_dir: Path | None = None  # where a self-driving engine keeps its transcript
    script: Path | dict[str, object] | None = None
    codex_mode: str = "responses"


def build_engine(
    request: EngineRequest, settings: StudioSettings
) -> ModelClient | SelfDrivingEngine:
    """The adapter for ``request.provider``; SDK clients honour their own base-URL variables."""
    provider = request.provider
    model = request.model or DEFAULT_MODELS.get(provider, "")
    if provider == "replay":
        if request.script is None:
            raise ConfigError("the replay provider needs a script (--script FILE)")
        source = request.script if isinstance(request.script, Path) else dict(request.script)
        return ReplayClient(load_script(source), model=model)
    if provider == "codex":
        from services.execution.providers.codex import CodexClient

        if request.codex_mode == "chat":
            return CodexClient(model=model, mode="chat")
        return CodexClient(model=model, mode="responses")
    if provider == "gemini":
        from services.execution.providers.gemini import GeminiClient

        return GeminiClient(model=model)
    if provider == "claude":
        from services.execution.providers.claude import ClaudeConfig, ClaudeEngine
        from services.execution.providers.claude_env import claude_env_from

        return ClaudeEngine(ClaudeConfig(
            model=model, workspace=request.workspace,
            env=claude_env_from(process_environment()),
            transcript_dir=request.transcript_dir or request.run_dir / "claude-transcript",
            scratch_dir=request.run_dir,
        ))
    raise ConfigError(f"unknown provider {provider!r}; choose one of {', '.join(PROVIDERS)}")


def command_limits(settings: StudioSettings) -> CommandLimits:
    """The resource limits of every command, from ``STUDIO_SANDBOX_*``."""
    mib = 1024 * 1024
    return CommandLimits(
        memory_bytes=settings.sandbox_memory_mb * mib, processes=settings.sandbox_processes,
        open_files=settings.sandbox_open_files,
        file_size_bytes=settings.sandbox_file_size_mb * mib,
        cpu_seconds=settings.sandbox_cpu_seconds, tmp_bytes=settings.sandbox_tmp_mb * mib,
    )


def command_sandbox(settings: StudioSettings) -> CommandSandbox:
    """The sandbox of this process (the mode and limits are fixed per process)."""
    return select_sandbox(settings.sandbox.value, command_limits(settings),
                          production=is_production(settings))


def sandbox_report(settings: StudioSettings) -> dict[str, str | None]:
    """The sandbox this process uses, and the warning an operator must see when it is none."""
    sandbox = command_sandbox(settings)
    warning = UNCONFINED_WARNING if sandbox.mode == "none" else None
    return {"configured": settings.sandbox.value, "mode": sandbox.mode, "warning": warning}
