"""Composition root shared by the CLI, the worker and the API: build engines and tool contexts.

This is where deployment settings meet the engine; the engine itself reads no configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.execution.ports import CommandSandbox, ModelClient, SelfDrivingEngine
from services.execution.providers.cloud_auth import AuthMode, auth_mode
from services.execution.providers.profiles import DEFAULT_MODELS as DEFAULT_MODELS
from services.execution.providers.profiles import (
    PROFILES,
    EngineSpec,
    model_or_default,
    provider_profile,
)
from services.execution.providers.profiles import PROVIDERS as PROVIDERS
from services.execution.sandbox.selection import UNCONFINED_WARNING, CommandLimits, select_sandbox
from services.settings import StudioSettings, is_production, process_environment


@dataclass(frozen=True)
class EngineRequest:
    provider: str
    model: str | None
    workspace: Path
    run_dir: Path
    transcript_dir: Path | None = None  # where a self-driving engine keeps its transcript
    script: Path | dict[str, object] | None = None
    codex_mode: str = "responses"
    output_schema: Mapping[str, Any] | None = None  # the final answer's JSON schema (a review)


def build_engine(
    request: EngineRequest, settings: StudioSettings
) -> ModelClient | SelfDrivingEngine:
    """The adapter for ``request.provider``, built as its profile says (``providers.profiles``).

    SDK clients honour their own base-URL variables; the provider's auth mode is
    ``STUDIO_<PROVIDER>_AUTH`` (``providers.cloud_auth``).
    """
    profile = provider_profile(request.provider)
    return profile.build(EngineSpec(
        model=model_or_default(profile.name, request.model), workspace=request.workspace,
        run_dir=request.run_dir, transcript_dir=request.transcript_dir, script=request.script,
        codex_mode=request.codex_mode, environ=process_environment(),
        output_schema=request.output_schema,
        auth_mode=auth_modes(settings).get(request.provider),
    ))


def auth_modes(settings: StudioSettings) -> dict[str, str]:
    """The auth mode of each provider that has them, by name (``STUDIO_*_AUTH``: each profile's
    ``auth_setting``, read from its ``auth_field``)."""
    modes: dict[str, str] = {}
    for name, profile in PROFILES.items():
        if profile.auth_field is not None:
            modes[name] = str(getattr(settings, profile.auth_field).value)
    return modes


def configured_auth_modes(settings: StudioSettings) -> dict[str, AuthMode]:
    """The :class:`AuthMode` each provider is configured with (what an executor is given)."""
    return {name: auth_mode(name, mode) for name, mode in auth_modes(settings).items()}


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
