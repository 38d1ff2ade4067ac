"""``claude``: the Claude Agent SDK (``ClaudeSDKClient``) as a :class:`SelfDrivingEngine`.

The SDK drives the Claude Code CLI bundled in its wheel, and the CLI runs the tool loop itself.
One CLI session per execution:

- our tool domains are the in-process MCP server ``studio`` (:mod:`.claude_tools`); Claude Code's
  built-in tools are off (``tools=[]``), no settings file is read (``setting_sources=[]``), no
  other MCP configuration is taken (``strict_mcp_config``), and the permission mode never prompts;
- ``max_turns`` and ``max_budget_usd`` are enforced by the CLI (``error_max_turns`` and
  ``error_max_budget_usd`` results); every tool call passes the gateway, where the other guards act;
  :meth:`ClaudeEngine.interrupt` stops the session from outside (wall clock, stall, cancellation);
- the CLI runs with an ephemeral ``CLAUDE_CONFIG_DIR`` and ``HOME`` and an explicit environment
  allowlist (:mod:`.claude_env`); its session transcript (JSONL) is copied to ``transcript_dir``
  before the directory is deleted.

Errors: a gateway exception is re-raised once the session has ended (``last_outcome`` then holds
what the session reported); an API failure the CLI gave up on (after its own, bounded, retries)
becomes :class:`ProviderUnavailable` or :class:`ProviderRejected`, ``retryable=False`` since the
CLI already retried.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    CLINotFoundError,
    Message,
    ResultMessage,
    SystemMessage,
    TextBlock,
)

from services.execution.errors import ConfigError, ErrorCode, ProviderUnavailable
from services.execution.messages import ToolSchema, Usage, UsageSemantic
from services.execution.ports import SessionOutcome, ToolGateway
from services.execution.providers import claude_env
from services.execution.providers.claude_errors import api_error, session_error
from services.execution.providers.claude_tools import (
    SERVER_NAME,
    GatewayBridge,
    allowed_tool_name,
    build_server,
)

PROVIDER = "claude"
INTERRUPT_GRACE_S = 10.0

#: How the loop reads a session's stop reason (anything else not ``end_turn`` is a failure).
STOP_REASON_CODES: Mapping[str, ErrorCode] = {
    "error_max_turns": ErrorCode.MAX_ITERATIONS_EXCEEDED,
    "error_max_budget_usd": ErrorCode.BUDGET_EXCEEDED,
    "interrupted": ErrorCode.INTERRUPTED,
}


@dataclass(frozen=True)
class ClaudeConfig:
    """Everything the engine needs, given by the composition root (it reads no environment).

    ``env`` is the process environment the root allows (pass it through
    :func:`claude_env.claude_env_from`; it is filtered again here). ``workspace`` is the CLI's
    working directory; ``transcript_dir`` where the session transcript is kept.
    """

    model: str
    workspace: Path
    api_key: str | None = None
    base_url: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    transcript_dir: Path | None = None
    cli_path: Path | None = None  # default: the CLI bundled with claude-agent-sdk
    max_retries: int = 2  # the CLI's own API retries (CLAUDE_CODE_MAX_RETRIES)
    scratch_dir: Path | None = None  # parent of the ephemeral config dir (default: system temp)
    python: str | None = None  # interpreter of the env launcher (default: this one)
    # the final answer's JSON schema (a review): the SDK's structured output
    output_schema: Mapping[str, Any] | None = None


@dataclass
class _Session:
    """What one run observed on the message stream."""

    bridge: GatewayBridge
    result: ResultMessage | None = None
    last_text: str = ""
    assistant_error: str | None = None
    failure: Exception | None = None
    model_replies: set[str] = field(default_factory=set)
    compactions: list[dict[str, Any]] = field(default_factory=list)  # Claude Code's own


class ClaudeEngine:
    """One Claude Code CLI session per :meth:`run_session` (see the module docstring)."""

    provider = PROVIDER

    def __init__(self, config: ClaudeConfig) -> None:
        self.config = config
        self.model = config.model
        self.last_outcome: SessionOutcome | None = None
        self._client: ClaudeSDKClient | None = None
        self._task_group: TaskGroup | None = None
        self._interrupt_requested = False

    async def run_session(
        self,
        *,
        system: str,
        prompt: str,
        tools: list[ToolSchema],
        gateway: ToolGateway,
        max_turns: int,
        max_budget_usd: float,
    ) -> SessionOutcome:
        self.last_outcome = None
        self._interrupt_requested = False
        session = _Session(bridge=GatewayBridge(gateway, self._request_interrupt))
        scratch = str(self.config.scratch_dir) if self.config.scratch_dir else None
        with tempfile.TemporaryDirectory(prefix="studio-claude-", dir=scratch) as tmp:
            root = Path(tmp)
            options = self._options(root, system, tools, session.bridge, max_turns, max_budget_usd)
            async with anyio.create_task_group() as task_group:
                self._task_group = task_group
                try:
                    await self._drive(options, prompt, session)
                finally:
                    self._task_group = None
                    # the session is over: a pending interrupt has nothing left to stop
                    task_group.cancel_scope.cancel()
            transcript = self._keep_transcript(root / "config", session)
        return self._finish(session, transcript)

    async def interrupt(self) -> None:
        """Stop the running session (its result then says ``interrupted``); no-op when idle."""
        self._interrupt_requested = True
        client = self._client
        if client is None:
            return
        with anyio.move_on_after(INTERRUPT_GRACE_S):
            try:
                await client.interrupt()
            except ClaudeSDKError:
                return  # the session ended meanwhile: nothing left to interrupt

    # ------------------------------------------------------------------ session

    def _request_interrupt(self) -> None:
        """Called from a tool handler: interrupt without waiting inside the MCP request."""
        self._interrupt_requested = True
        if self._task_group is not None:
            self._task_group.start_soon(self.interrupt)

    def _options(
        self,
        root: Path,
        system: str,
        tools: list[ToolSchema],
        bridge: GatewayBridge,
        max_turns: int,
        max_budget_usd: float,
    ) -> ClaudeAgentOptions:
        config_dir, home = root / "config", root / "home"
        config_dir.mkdir()
        home.mkdir()
        env = claude_env.session_env(
            self.config.env,
            config_dir=config_dir,
            home=home,
            api_key=self.config.api_key,
            base_url=self.config.base_url,
            max_retries=self.config.max_retries,
        )
        launcher = claude_env.write_launcher(
            root / "claude-launcher",
            real_cli=self.config.cli_path or claude_env.bundled_cli_path(),
            keep=env,
            python=self.config.python or claude_env.default_python(),
        )
        return ClaudeAgentOptions(
            tools=[],
            allowed_tools=[allowed_tool_name(t.name) for t in tools],
            mcp_servers={SERVER_NAME: build_server(tools, bridge)},
            strict_mcp_config=True,
            setting_sources=[],
            system_prompt=system,
            model=self.config.model,
            max_turns=max_turns,
            max_budget_usd=max_budget_usd,
            cwd=str(self.config.workspace),
            permission_mode="dontAsk",
            cli_path=str(launcher),
            env=env,
            output_format=({"type": "json_schema", "schema": dict(self.config.output_schema)}
                           if self.config.output_schema is not None else None),
        )

    async def _drive(self, options: ClaudeAgentOptions, prompt: str, session: _Session) -> None:
        """Run the session to its result, consuming the whole stream; errors go to ``session``."""
        client = ClaudeSDKClient(options)
        try:
            await client.connect()
            self._client = client
            if not self._interrupt_requested:  # interrupted while the CLI was starting
                await client.query(prompt)
                async for message in client.receive_response():
                    _observe(session, message)
        except CLINotFoundError as exc:
            session.failure = ConfigError(f"Claude Code CLI not found: {exc}")
        except ClaudeSDKError as exc:
            session.failure = session_error(exc)
        finally:
            self._client = None
            await client.disconnect()

    # ------------------------------------------------------------------ outcome

    def _keep_transcript(self, config_dir: Path, session: _Session) -> str | None:
        """Copy the CLI's JSONL transcript out of the ephemeral config dir."""
        if self.config.transcript_dir is None:
            return None
        session_id = session.result.session_id if session.result else None
        pattern = f"{session_id}.jsonl" if session_id else "*.jsonl"
        found = sorted((config_dir / "projects").glob(f"*/{pattern}"), key=_mtime)
        if not found:
            return None
        self.config.transcript_dir.mkdir(parents=True, exist_ok=True)
        target = self.config.transcript_dir / f"claude-{found[-1].stem}.jsonl"
        shutil.copyfile(found[-1], target)
        return str(target)

    def _finish(self, session: _Session, transcript: str | None) -> SessionOutcome:
        result = session.result
        outcome = SessionOutcome(
            final_text=_final_text(session),
            usage=_usage(result),
            turns=len(session.model_replies),
            stop_reason=self._stop_reason(result),
            transcript_path=transcript,
            compactions=tuple(session.compactions),
        )
        self.last_outcome = outcome
        if session.bridge.stop_error is not None:
            raise session.bridge.stop_error
        if session.failure is not None and not self._interrupt_requested:
            raise session.failure
        failure = api_error(result, session.assistant_error)
        if failure is not None and not self._interrupt_requested:
            raise failure
        if result is None and not self._interrupt_requested:
            raise ProviderUnavailable(
                "the Claude Code CLI ended without a result", retryable=False
            )
        return outcome

    def _stop_reason(self, result: ResultMessage | None) -> str:
        if self._interrupt_requested:
            return "interrupted"
        if result is None:
            return "no_result"
        if result.subtype == "success":
            return "api_error" if result.is_error else "end_turn"
        return result.subtype


def _observe(session: _Session, message: Message) -> None:
    if isinstance(message, AssistantMessage):
        if message.error is not None:
            session.assistant_error = message.error
        if message.parent_tool_use_id is None:
            # one model reply arrives as several messages (one per content block), same id
            session.model_replies.add(message.message_id or message.uuid or str(id(message)))
            text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
            if text:
                session.last_text = text
    elif isinstance(message, ResultMessage):
        session.result = message
    elif isinstance(message, SystemMessage) and message.subtype == "compact_boundary":
        session.compactions.append(compaction_of(message.data))


def compaction_of(data: dict[str, Any]) -> dict[str, Any]:
    """A compaction Claude Code made (its ``compact_boundary`` message), as the journal records
    it: what triggered it and how many tokens the conversation had before."""
    meta = data.get("compact_metadata") or data.get("compactMetadata") or {}
    pre = meta.get("pre_tokens", meta.get("preTokens")) if isinstance(meta, dict) else None
    trigger = meta.get("trigger") if isinstance(meta, dict) else None
    return {"source": "claude_code", "trigger": str(trigger or "auto"),
            "before_tokens": int(pre) if isinstance(pre, int | float) else None}


def _final_text(session: _Session) -> str:
    result = session.result
    if result is not None and result.structured_output is not None and not result.is_error:
        return json.dumps(result.structured_output)  # the SDK's validated structured output
    if result is not None and isinstance(result.result, str) and not result.is_error:
        return result.result or session.last_text
    return session.last_text


def _usage(result: ResultMessage | None) -> Usage:
    """The session's cumulative usage; ``input_tokens`` includes cache reads and writes."""
    raw: dict[str, Any] = (result.usage if result else None) or {}
    cache_read = int(raw.get("cache_read_input_tokens") or 0)
    cache_write = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + cache_read + cache_write,
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_input_tokens=cache_read,
        cache_write_input_tokens=cache_write,
        cost_usd=result.total_cost_usd if result else None,
        semantic=UsageSemantic.CUMULATIVE,
    )


def _mtime(path: Path) -> float:
    return path.stat().st_mtime
