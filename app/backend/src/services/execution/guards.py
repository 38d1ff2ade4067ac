"""The loop's guards: limits, error-loop detection and provider retry timing.

Budget and iteration limits are checked before every model call; the loop detector looks at the
last ``window`` tool calls: the same tool on the same target with the same outcome warns the model
at ``warn_at`` repetitions and stops the run at ``stop_at``. A command that timed out is never
counted (a long command that is merely slow is not a loop), and a command's outcome includes its
output, so polling something that changes is not a loop either.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from services.execution.messages import ToolCall

DEFAULT_MAX_ITERATIONS = 24
DEFAULT_MAX_BUDGET_USD = 2.00


@dataclass(frozen=True)
class AgentLimits:
    """Per-execution limits (defaults from SPEC §3; each configurable per node and globally)."""

    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_budget_usd: float = DEFAULT_MAX_BUDGET_USD
    wall_clock_s: float = 3600.0
    stall_s: float = 600.0
    # compaction (services.execution.compaction): the model's window unless
    # ``context_window_tokens`` > 0, the marks as fractions of it, the turns kept whole
    context_window_tokens: int = 0
    context_high_mark: float = 0.8
    context_low_mark: float = 0.5
    context_keep_turns: int = 4
    compaction_enabled: bool = True
    # compaction off: today's elision, one old output at a time above this many tokens
    context_token_budget: int = 120_000
    loop_window: int = 10
    loop_warn_at: int = 3
    loop_stop_at: int = 5


class LoopVerdict(StrEnum):
    OK = "ok"
    WARN = "warn"
    STOP = "stop"


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _outcome_fingerprint(envelope: dict[str, Any]) -> str | None:
    """What counts as "the same outcome"; ``None`` when the call must never count as a loop."""
    if envelope.get("ok"):
        result = dict(envelope.get("result") or {})
        if result.get("timed_out"):
            return None
        result.pop("duration_ms", None)
        return "ok:" + _digest(result)
    error = envelope.get("error") or {}
    return f"error:{error.get('code')}:{_digest(error.get('message'))}"


class LoopDetector:
    """Sliding-window detector of repeated (tool, target, outcome) triples."""

    def __init__(self, window: int = 10, warn_at: int = 3, stop_at: int = 5) -> None:
        self._recent: deque[str | None] = deque(maxlen=window)
        self.warn_at = warn_at
        self.stop_at = stop_at

    def observe(self, call: ToolCall, envelope: dict[str, Any]) -> tuple[LoopVerdict, int]:
        """Record one call; answer the verdict and how often the triple is in the window."""
        outcome = _outcome_fingerprint(envelope)
        key = None if outcome is None else f"{call.tool_name}:{_digest(call.args)}:{outcome}"
        self._recent.append(key)
        if key is None:
            return LoopVerdict.OK, 0
        count = sum(1 for k in self._recent if k == key)
        if count >= self.stop_at:
            return LoopVerdict.STOP, count
        if count >= self.warn_at:
            return LoopVerdict.WARN, count
        return LoopVerdict.OK, count


@dataclass(frozen=True)
class RetryPolicy:
    """Provider retries: at most ``max_attempts`` in all, exponential backoff with full jitter."""

    max_attempts: int = 3
    base_delay_s: float = 1.0
    max_delay_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.max_delay_s)
        ceiling: float = min(self.max_delay_s, self.base_delay_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + rng.uniform(0, ceiling / 2)
