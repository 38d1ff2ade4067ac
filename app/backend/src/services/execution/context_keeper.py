"""The loop's side of compaction: measure each request, compact when it passes the high mark,
refuse what cannot fit (``context_exhausted``). The pure steps are in :mod:`.compaction`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from services.execution.compaction import (
    Compaction,
    ContextPolicy,
    elide_before,
    fixed_tokens,
    summary_cut,
    summary_message,
    summary_request,
    summary_text,
    turn_starts,
    turns_in,
)
from services.execution.conversation import TokenCounter
from services.execution.errors import ErrorCode
from services.execution.messages import Message, ToolSchema
from services.execution.outcomes import StopRun

#: Writes the summary: ``(history of the summary request) -> text`` (a model call charged to
#: the run).
Summarize = Callable[[list[Message]], Awaitable[str]]


class ContextKeeper:
    """Keeps one execution's requests inside its model's window."""

    def __init__(self, policy: ContextPolicy, system: str, tools: Sequence[ToolSchema],
                 model: str, counter: TokenCounter | None = None) -> None:
        self.policy = policy
        self.model = model
        self.fixed = fixed_tokens(system, tools)
        self.counter = counter or TokenCounter()

    def size(self, messages: list[Message]) -> int:
        """The estimated tokens of the next request."""
        return self.fixed + self.counter.total(messages)

    def check_fixed(self) -> None:
        """The system prompt and the tools alone must leave room for a conversation."""
        if self.fixed >= self.policy.window:
            raise StopRun(ErrorCode.CONTEXT_EXHAUSTED, self._exhausted(self.fixed))

    async def before_request(self, messages: list[Message], task: str,
                             summarize: Summarize) -> Compaction | None:
        """Compact ``messages`` in place when the next request passes the high mark; answers
        what was done (``None``: nothing). Raises ``context_exhausted`` when it cannot fit."""
        self.check_fixed()
        before = self.size(messages)
        if before <= self.policy.high_tokens:
            return None
        done = Compaction(before_tokens=before, window=self.policy.window)
        starts = turn_starts(messages)
        # what the provider has cached: the last request (the history before the newest turn)
        as_sent = messages[:starts[-1]] if starts else list(messages)
        keep = self.policy.keep_turns
        boundary = starts[-keep] if len(starts) >= keep else 0
        done.elided = elide_before(messages, boundary)
        if self.size(messages) > self.policy.low_tokens and len(starts) > 1:
            await self._summarize(messages, as_sent, task, summarize, done)
        done.after_tokens = self.size(messages)
        if done.after_tokens > self.policy.window:
            raise StopRun(ErrorCode.CONTEXT_EXHAUSTED, self._exhausted(done.after_tokens))
        return done

    async def _summarize(self, messages: list[Message], as_sent: list[Message], task: str,
                         summarize: Summarize, done: Compaction) -> None:
        """Ask for the summary (the last request plus the fixed prompt: served from the cache),
        then replace the fewest oldest turns so that the rest, with it, fits the low mark."""
        history = summary_request(as_sent)
        if self.size(history) > self.policy.window:  # one turn jumped past the window
            history = summary_request(messages[:turn_starts(messages)[-1]])
        text = summary_text(task, await summarize(history))
        summary_size = self.counter.size(summary_message(text, 0))
        sizes = [self.counter.size(m) for m in messages]
        room = self.policy.low_tokens - self.fixed - summary_size
        cut = summary_cut(sizes, messages, max(room, 0))
        if cut <= 0:
            return
        messages[:cut] = [summary_message(text, turns_in(messages[:cut]))]
        done.replaced, done.summary = cut, text

    def _exhausted(self, needed: int) -> str:
        return (f"the request needs about {needed} tokens but model {self.model!r} has a "
                f"context window of {self.policy.window} tokens (system prompt and tools alone: "
                f"about {self.fixed})")

