"""The patterns of ``workspace.search``, matched under a time budget.

A model-supplied pattern such as ``^(a|a)+$`` backtracks without end on the right line. Matching
goes through the ``regex`` engine (the syntax of :mod:`re`, and more), which takes a ``timeout``
and releases the GIL while it matches (``concurrent=True``): one search gets
:data:`SEARCH_BUDGET_S` seconds of matching in all, across every line of every file, and past it
answers ``search_timeout`` (a :class:`~services.execution.errors.ToolFailure`: the model sees the
error and the loop goes on). Glob patterns (``workspace.glob``, ``search``'s ``glob``) are
translated to regular expressions (``*a*a*a*a*b`` backtracks too) and matched the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import regex

from services.execution.errors import ErrorCode, ToolFailure

SEARCH_BUDGET_S = 10.0


class BoundedPattern:
    """A compiled search pattern whose matches share one time budget."""

    def __init__(self, pattern: str, *, literal: bool = False, budget_s: float | None = None,
                 translated: str | None = None) -> None:
        """``pattern`` as given (``translated``: the regular expression a glob became)."""
        self.pattern = pattern
        self.budget_s = SEARCH_BUDGET_S if budget_s is None else budget_s
        self.remaining_s = self.budget_s
        glob = translated is not None
        source: str = translated if translated is not None else (
            regex.escape(pattern) if literal else pattern)
        what = "glob pattern" if glob else "regular expression"
        try:
            self._compiled = regex.compile(source, regex.DOTALL if glob else 0)
        except regex.error as exc:
            raise ToolFailure(ErrorCode.INVALID_ARGUMENTS, f"invalid {what}: {exc}",
                              details={"pattern": pattern}) from None

    def search(self, text: str) -> bool:
        """Whether ``text`` matches; ``search_timeout`` once the budget is spent."""
        return self._timed(self._compiled.search, text)

    def fullmatch(self, text: str) -> bool:
        """Whether all of ``text`` matches; ``search_timeout`` once the budget is spent."""
        return self._timed(self._compiled.fullmatch, text)

    def _timed(self, match: Callable[..., object], text: str) -> bool:
        if self.remaining_s <= 0:
            raise self._timeout()
        started = time.monotonic()
        try:
            return match(text, timeout=self.remaining_s, concurrent=True) is not None
        except TimeoutError:
            raise self._timeout() from None
        finally:
            self.remaining_s -= time.monotonic() - started

    def _timeout(self) -> ToolFailure:
        return ToolFailure(ErrorCode.SEARCH_TIMEOUT,
                           f"the pattern took more than its {self.budget_s:g} s of matching "
                           "(it backtracks too much): simplify it or search literal text",
                           details={"pattern": self.pattern, "budget_s": self.budget_s})
