"""Provider profiles: what is special about each provider, in one place.

One :class:`ProviderProfile` per provider, in :data:`PROFILES` (the order ``studio providers``
prints). A profile holds a provider's facts as data:

- ``default_model``: the model used when a run names none (:func:`model_or_default`);
- ``auth_setting``: the setting that picks its auth mode (``STUDIO_<PROVIDER>_AUTH``, the
  ``<provider>_auth`` field of the settings) and ``auth_modes``, the modes it offers
  (:mod:`.cloud_auth`); ``None`` and none for a provider without credentials (replay);
- ``legacy_cli``: whether the legacy runtime (agent runtime cutover off) has an agent CLI for it
  (:func:`legacy_refusal` answers the refusal of the others);
- ``telemetry_name``: its ``gen_ai.provider.name`` in traces (:func:`telemetry_name`);
- ``tool_schema``: how a tool's neutral JSON Schema is sent, one of :mod:`.schema_profiles`
  (OpenAI strict for ``codex``, the Gemini subset for ``gemini``, the schema as is for ``claude``);
  the adapter's wire module applies the same function (a unit test compares them);
- ``capabilities``: the provider's row of the capability matrix (SDK, wire, base-URL variable,
  cost semantic, flags) and where each guard of the loop acts for it (:mod:`.capabilities` shows
  the matrix; the conformance table asserts it);
- ``build``: how its adapter is made from an :class:`EngineSpec`. A builder imports its adapter,
  and so the SDK, when it is called: importing this module loads no SDK, so ``studio --help``
  stays light;
- ``needs_script``: the run needs a scripted trajectory (replay);
- ``context_window``: the window and output limit of a model of this provider that
  :data:`~services.execution.context_windows.DEFAULT_WINDOWS` (the per-model table, beside the
  prices) does not know (:func:`provider_window`).

The composition root looks providers up here (:func:`provider_profile`) instead of switching on
their names; the API's provider type, the auth maps of the composition root and of the
executors, and every default model are derived from these profiles (a unit test checks that the
settings' auth enums and the legacy runtime's CLIs agree with them). A new provider is an adapter
module plus one profile below.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from services.execution.context_windows import FALLBACK, ModelWindow
from services.execution.errors import ConfigError, ErrorCode, ExecutionError
from services.execution.ports import ModelClient, SelfDrivingEngine
from services.execution.providers.cloud_auth import (
    API_KEY,
    MODES,
    AuthMode,
    auth_mode,
    check_mode,
    setting_name,
    value_problem,
)
from services.execution.providers.schema_profiles import (
    Schema,
    anthropic,
    gemini,
    neutral,
    openai_strict,
)

Engine = ModelClient | SelfDrivingEngine

# ---------------------------------------------------------------- capabilities and guards

#: The guards of the loop (SPEC §3), in the order the docs list them.
GUARDS: tuple[str, ...] = (
    "max_iterations",
    "max_budget_usd",
    "repository_budget",
    "loop_detection",
    "kill_switch",
    "wall_clock",
    "provider_retries",
    "invalid_arguments",
)

GUARD_TITLES: Mapping[str, str] = {
    "max_iterations": "max_iterations",
    "max_budget_usd": "max_budget_usd (execution budget)",
    "repository_budget": "daily repository budget",
    "loop_detection": "error-loop detection",
    "kill_switch": "kill switch, cancellation",
    "wall_clock": "wall clock, stall",
    "provider_retries": "provider retries",
    "invalid_arguments": "malformed tool arguments",
}

TURN_BASED_GUARDS: Mapping[str, str] = {
    "max_iterations": "the loop, before each model call: max_iterations_exceeded",
    "max_budget_usd": "the loop, before each model call (cost from the price table, delta "
                      "per call): budget_exceeded",
    "repository_budget": "the loop, before each model call (BudgetPort.check)",
    "loop_detection": "the loop, after each tool call: a user-message warning at 3, "
                      "loop_detected at 5",
    "kill_switch": "the loop, before each model call and each tool call",
    "wall_clock": "the loop, before each model call; each model call is stall-timed",
    "provider_retries": "the loop: at most 3 attempts on 429/5xx/424/connection errors, "
                        "backoff with jitter, Retry-After; SDK retries off; 4xx not retried",
    "invalid_arguments": "the dispatcher answers invalid_arguments as a tool result; the run "
                         "goes on",
}

CLAUDE_GUARDS: Mapping[str, str] = {
    "max_iterations": "the Claude Code CLI (max_turns); its error_max_turns result becomes "
                      "max_iterations_exceeded",
    "max_budget_usd": "the Claude Code CLI (max_budget_usd, its own cumulative "
                      "total_cost_usd); error_max_budget_usd becomes budget_exceeded",
    "repository_budget": "the loop before the session starts, then the tool gateway at each "
                         "tool call (a stop interrupts the CLI)",
    "loop_detection": "the tool gateway, at each tool call: the warning travels in the tool "
                      "result at 3, loop_detected and interrupt() at 5",
    "kill_switch": "the tool gateway, at each tool call (then interrupt()); a model call "
                   "already in flight is not stopped",
    "wall_clock": "the loop, around the whole session (cancelled when it runs out: stalled)",
    "provider_retries": "the Claude Code CLI (CLAUDE_CODE_MAX_RETRIES, 2 here) on 429/5xx; "
                        "a 400 is re-sent only without an optional anthropic-beta feature, "
                        "then provider_rejected; the loop does not retry over the CLI",
    "invalid_arguments": "the dispatcher answers invalid_arguments as a tool result; the run "
                         "goes on",
}

REPLAY_GUARDS: Mapping[str, str] = {
    **TURN_BASED_GUARDS,
    "max_budget_usd": "the loop, before each model call (the cost each scripted turn states)",
    "provider_retries": "not applicable: replay has no wire, so no provider error to retry",
}


@dataclass(frozen=True)
class ProviderCapabilities:
    """One provider's row of the matrix.

    The defaults describe the common case, a turn-based adapter driven by our loop: tool calls,
    parallel ones included, and MCP tools; no streaming; cost reported per call; the guards where
    the loop puts them. A profile states only where its provider differs.
    """

    provider: str
    sdk: str
    wire: str | None  # the API spoken; None: no provider call at all
    tool_calls: bool = True
    parallel_tool_calls: bool = True
    streaming: bool = False
    mcp: bool = True
    thought_signature: bool = False  # opaque reasoning tokens to send back with each call
    self_driving_loop: bool = False  # the SDK runs the tool loop itself
    chat_mode: bool = False  # also speaks Chat Completions, for OpenAI-compatible servers
    base_url_env: str | None = None  # the variable the SDK reads for its endpoint
    cost_semantic: str = "delta"  # "delta" per call, or "cumulative" per session
    guards: Mapping[str, str] = field(default_factory=lambda: TURN_BASED_GUARDS)

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["guards"] = dict(self.guards)
        return data


#: The boolean capabilities, in the order ``studio providers`` prints them.
FLAGS: tuple[str, ...] = (
    "tool_calls", "parallel_tool_calls", "streaming", "mcp", "thought_signature",
    "self_driving_loop", "chat_mode",
)



# ---------------------------------------------------------------- the profile


@dataclass(frozen=True)
class EngineSpec:
    """What a builder needs, given by the composition root (the engine reads no configuration).

    ``environ`` is the process environment the root allows; only a provider that runs a CLI of
    its own reads it (claude filters it again through :func:`.claude_env.claude_env_from`).
    """

    model: str
    workspace: Path
    run_dir: Path
    transcript_dir: Path | None = None  # where a self-driving engine keeps its transcript
    script: Path | dict[str, object] | None = None  # replay only
    codex_mode: str = "responses"  # codex only: "responses" or "chat"
    # the JSON schema of the final answer (a review); claude asks its SDK for structured output
    output_schema: Mapping[str, Any] | None = None
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    # The provider's auth mode (STUDIO_<PROVIDER>_AUTH; :mod:`.cloud_auth`); None: the API key.
    auth_mode: str | None = None


@dataclass(frozen=True)
class ProviderProfile:
    """One provider's facts (see the module docstring)."""

    name: str
    default_model: str
    tool_schema: Callable[[Schema], Schema]
    capabilities: ProviderCapabilities
    build: Callable[[EngineSpec], Engine]
    telemetry_name: str
    needs_script: bool = False
    legacy_cli: bool = False
    context_window: ModelWindow = FALLBACK

    @property
    def auth_modes(self) -> Mapping[str, AuthMode]:
        """The auth modes the provider offers, by name (none: it takes no credentials)."""
        return MODES.get(self.name, {})

    @property
    def auth_setting(self) -> str | None:
        """``STUDIO_<PROVIDER>_AUTH``, the setting that picks one of :attr:`auth_modes`."""
        return setting_name(self.name) if self.auth_modes else None

    @property
    def auth_field(self) -> str | None:
        """The settings field of :attr:`auth_setting` (``claude_auth``)."""
        return f"{self.name}_auth" if self.auth_modes else None


def _cloud_mode(provider: str, spec: EngineSpec) -> AuthMode:
    """The provider's auth mode, its values checked (the API key mode is the SDK's own business:
    it reads its variables itself)."""
    mode = auth_mode(provider, spec.auth_mode)
    if mode.name != API_KEY:
        check_mode(mode, spec.environ)
    return mode


def _build_codex(spec: EngineSpec) -> Engine:
    from services.execution.providers.codex import CodexClient

    mode = _cloud_mode("codex", spec)
    client = None
    if mode.name == "azure":
        from services.execution.providers.cloud_clients import azure_openai_client

        client = azure_openai_client(spec.environ, deployment=spec.model)
    return CodexClient(model=spec.model, mode="chat" if spec.codex_mode == "chat" else "responses",
                       client=client)


def _build_gemini(spec: EngineSpec) -> Engine:
    from services.execution.providers.gemini import GeminiClient

    mode = _cloud_mode("gemini", spec)
    if mode.name == "vertex":
        from services.execution.providers.cloud_clients import vertex_target

        return GeminiClient(model=spec.model, vertex=vertex_target(spec.environ))
    return GeminiClient(model=spec.model)


def _build_claude(spec: EngineSpec) -> Engine:
    from services.execution.providers.claude import ClaudeConfig, ClaudeEngine
    from services.execution.providers.claude_env import claude_env_from

    mode = _cloud_mode("claude", spec)
    return ClaudeEngine(ClaudeConfig(
        model=spec.model, workspace=spec.workspace, env=claude_env_from(spec.environ, mode),
        transcript_dir=spec.transcript_dir or spec.run_dir / "claude-transcript",
        scratch_dir=spec.run_dir, output_schema=spec.output_schema,
    ))


def _build_replay(spec: EngineSpec) -> Engine:
    from services.execution.providers.replay import ReplayClient, load_script

    if spec.script is None:
        raise ConfigError("the replay provider needs a script (--script FILE)")
    source = spec.script if isinstance(spec.script, Path) else dict(spec.script)
    return ReplayClient(load_script(source), model=spec.model)


# ---------------------------------------------------------------- the registry

PROFILES: Mapping[str, ProviderProfile] = {
    "codex": ProviderProfile(
        name="codex", default_model="gpt-5.1", tool_schema=openai_strict, build=_build_codex,
        telemetry_name="openai", legacy_cli=True, context_window=ModelWindow(128_000, 16_384),
        capabilities=ProviderCapabilities(
            provider="codex", sdk="openai", wire="OpenAI Responses (chat mode: Chat Completions)",
            chat_mode=True, base_url_env="OPENAI_BASE_URL",
        ),
    ),
    "gemini": ProviderProfile(
        name="gemini", default_model="gemini-2.5-pro", tool_schema=gemini, build=_build_gemini,
        telemetry_name="gcp.gemini", legacy_cli=True,
        context_window=ModelWindow(1_048_576, 8_192),
        capabilities=ProviderCapabilities(
            provider="gemini", sdk="google-genai", wire="Gemini generateContent",
            thought_signature=True, base_url_env="GOOGLE_GEMINI_BASE_URL",
        ),
    ),
    "claude": ProviderProfile(
        name="claude", default_model="claude-sonnet-4-5", tool_schema=anthropic,
        build=_build_claude, telemetry_name="anthropic", legacy_cli=True,
        context_window=ModelWindow(200_000, 8_192),
        capabilities=ProviderCapabilities(
            provider="claude", sdk="claude-agent-sdk (bundled Claude Code CLI)",
            wire="Anthropic Messages (SSE)", streaming=True, self_driving_loop=True,
            base_url_env="ANTHROPIC_BASE_URL", cost_semantic="cumulative", guards=CLAUDE_GUARDS,
        ),
    ),
    "replay": ProviderProfile(
        name="replay", default_model="replay", tool_schema=neutral, build=_build_replay,
        telemetry_name="studio.replay", needs_script=True,
        context_window=ModelWindow(1_000_000, 32_000),
        capabilities=ProviderCapabilities(
            provider="replay", sdk="none (a scripted trajectory)", wire=None,
            guards=REPLAY_GUARDS,
        ),
    ),
}

#: The provider names, in the registry's order.
PROVIDERS: tuple[str, ...] = tuple(PROFILES)
#: The model each provider uses when a run names none.
DEFAULT_MODELS: Mapping[str, str] = {name: p.default_model for name, p in PROFILES.items()}


def provider_profile(name: str) -> ProviderProfile:
    """The profile of ``name``; a :class:`ConfigError` naming the choices when there is none."""
    found = PROFILES.get(name)
    if found is None:
        raise ConfigError(f"unknown provider {name!r}; choose one of {', '.join(PROVIDERS)}")
    return found


def model_or_default(provider: str, model: str | None) -> str:
    """The model a run of ``provider`` uses: ``model`` when named, else the provider's default
    (``""`` for an unknown provider, which is refused where its engine is built)."""
    if model:
        return model
    found = PROFILES.get(provider)
    return found.default_model if found is not None else ""


def provider_window(provider: str) -> ModelWindow:
    """The window of a model of ``provider`` the per-model table does not know."""
    found = PROFILES.get(provider)
    return found.context_window if found is not None else FALLBACK


def telemetry_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a provider (one without a profile: ``studio.<name>``)."""
    found = PROFILES.get(provider)
    return found.telemetry_name if found is not None else f"studio.{provider}"


#: The providers the legacy runtime has an agent CLI for, in the registry's order.
LEGACY_PROVIDERS: tuple[str, ...] = tuple(name for name, p in PROFILES.items() if p.legacy_cli)


def legacy_refusal(provider: str) -> ExecutionError | None:
    """Why ``provider`` cannot run on the legacy runtime (no agent CLI there), else ``None``."""
    if provider in LEGACY_PROVIDERS:
        return None
    return ExecutionError(
        f"agent runtime cutover is off and provider {provider!r} has no agent CLI in the "
        f"legacy runtime (available: {', '.join(sorted(LEGACY_PROVIDERS))})",
        code=ErrorCode.UNSUPPORTED_CAPABILITY)


#: The adapter module each builder imports (and with it the provider's SDK).
ADAPTER_MODULES: Mapping[str, str] = {
    "codex": "services.execution.providers.codex",
    "gemini": "services.execution.providers.gemini",
    "claude": "services.execution.providers.claude",
}


def configured_providers(modes: Mapping[str, str | None],
                         environ: Mapping[str, str]) -> tuple[str, ...]:
    """The providers of :data:`ADAPTER_MODULES` whose credentials this deployment configures, in
    the registry's order: the auth mode ``modes`` picks for the provider (its ``auth_field``'s
    value, by provider name; absent or empty: the API key) is not the API key mode (a cloud mode
    is the operator's explicit choice), or one of the API key mode's credential variables is set
    in ``environ`` to a value with something besides blanks and no control character (one that
    :func:`~.cloud_auth.check_mode` would refuse does not count). A mode no profile knows counts
    for nothing. Only names are answered, never a value: the worker tells its fork server which
    SDKs to import before it says ready (:mod:`services.cli.fork_server`)."""
    found: list[str] = []
    for name in ADAPTER_MODULES:
        choice = (modes.get(name) or "").strip() or API_KEY
        offered = MODES.get(name, {})
        if choice not in offered:
            continue
        if choice != API_KEY or any(
                (value := environ.get(variable)) is not None and value.strip()
                and value_problem(variable, value) is None
                for group in offered[API_KEY].credential_sets for variable in group):
            found.append(name)
    return tuple(found)


def prewarm(name: str) -> threading.Thread | None:
    """Import ``name``'s adapter (its SDK: a few hundred milliseconds) in a background thread,
    while the caller does work that waits on other processes (a workspace's ``git clone`` and
    checkout), so that building the engine afterwards finds it loaded. Nothing else is done in
    the thread; an import that fails there fails again, with its error, where the builder
    imports it. Answers the thread (``None`` for a provider with nothing to import)."""
    module = ADAPTER_MODULES.get(name)
    if module is None or module in sys.modules:
        return None

    def load() -> None:
        with contextlib.suppress(Exception):
            importlib.import_module(module)

    thread = threading.Thread(target=load, name=f"prewarm-{name}", daemon=True)
    thread.start()
    return thread
