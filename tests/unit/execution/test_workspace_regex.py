"""``workspace.search`` with a pattern that backtracks without end: a ``search_timeout`` envelope
within the time budget, and the next call works as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.tool_domains.workspace import regex as workspace_regex
from services.execution.tool_domains.workspace.regex import BoundedPattern
from tests.unit.execution.workspace_helpers import Workspace

HOSTILE = r"^(a|a)+$"  # exponential backtracking on "aaa...ab" (the classic ReDoS shape)


def test_a_backtracking_pattern_answers_search_timeout_and_the_next_call_works(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_regex, "SEARCH_BUDGET_S", 0.5)
    (workspace / "bait.txt").write_text("a" * 60 + "b\n")
    ws = Workspace(workspace)
    envelope = ws.envelope("search", pattern=HOSTILE)
    assert not envelope["ok"]
    assert envelope["error"]["code"] == "search_timeout"
    assert envelope["error"]["details"] == {"pattern": HOSTILE, "budget_s": 0.5}
    assert ws.ok("search", pattern="a+b")["count"] == 1


def test_the_budget_is_shared_by_every_line() -> None:
    pattern = BoundedPattern(HOSTILE, budget_s=0.3)
    with pytest.raises(Exception, match="more than its 0.3 s") as raised:
        for _ in range(100):
            pattern.search("a" * 24 + "b")  # each line alone may fit; all of them do not
    assert getattr(raised.value, "code", None) == "search_timeout"
    assert pattern.remaining_s <= 0


def test_literal_and_invalid_patterns() -> None:
    assert BoundedPattern("a.b", literal=True).search("xa.by")
    assert not BoundedPattern("a.b", literal=True).search("axb")
    with pytest.raises(Exception, match="invalid regular expression") as raised:
        BoundedPattern("(")
    assert getattr(raised.value, "code", None) == "invalid_arguments"


def test_a_backtracking_glob_answers_within_the_budget(
        workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``*a*a*a*a*a*b`` took minutes per name under ``re``; globs go through the same engine."""
    monkeypatch.setattr(workspace_regex, "SEARCH_BUDGET_S", 0.5)
    (workspace / ("a" * 200)).write_text("x\n")
    ws = Workspace(workspace)
    hostile = "*a" * 12 + "*b"
    for envelope in (ws.envelope("glob", pattern=hostile),
                     ws.envelope("search", pattern="x", glob=hostile)):
        assert (envelope["ok"] and envelope["result"]["count"] == 0) or \
            envelope["error"]["code"] == "search_timeout", envelope
    assert ws.ok("glob", pattern="a*")["count"] == 1
