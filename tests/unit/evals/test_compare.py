"""The gate: a significant paired drop or a costlier run fails it; an equal run passes."""

from __future__ import annotations

from services.evals.compare import GateRules, compare, comparison_text
from tests.unit.evals.builders import item, summary

TASKS = [f"t{i}" for i in range(8)]


def test_a_significant_drop_fails_and_an_equal_run_passes() -> None:
    base = summary("base", [item(t, True) for t in TASKS])
    worse = summary("new", [item(t, i < 2) for i, t in enumerate(TASKS)])  # 6 lost
    failed = compare(base, worse, GateRules())
    assert not failed.passed and "pass rate dropped 75.0%" in failed.failures[0]
    assert failed.pairs.lost == 6 and failed.pairs.p_worse < 0.05
    text = comparison_text(base, worse, failed)
    assert "95% CI" in text and "GATE FAILED" in text
    same = compare(base, summary("same", [item(t, True) for t in TASKS]), GateRules())
    assert same.passed and "gate passed" in comparison_text(base, base, same)


def test_a_small_drop_is_within_the_significance_and_the_threshold() -> None:
    base = summary("base", [item(t, True) for t in TASKS])
    one_lost = summary("new", [item(t, i > 0) for i, t in enumerate(TASKS)])
    assert compare(base, one_lost, GateRules()).passed  # p = 0.5: not significant
    assert not compare(base, one_lost, GateRules(alpha=0.6)).passed  # positive control
    assert compare(base, one_lost, GateRules(max_drop=0.2, alpha=0.6)).passed


def test_cost_per_task_rising_past_the_threshold_fails() -> None:
    base = summary("base", [item(t, True, cost=0.10) for t in TASKS])
    pricier = summary("new", [item(t, True, cost=0.20) for t in TASKS])
    failures = compare(base, pricier, GateRules(max_cost_increase=0.5)).failures
    assert failures and "cost per task rose" in failures[0]
    assert compare(base, pricier, GateRules(max_cost_increase=1.5)).passed


def test_repeats_vote_and_disjoint_runs_fail() -> None:
    votes = summary("r", [item("t", True, repeat=0), item("t", True, repeat=1),
                          item("t", False, repeat=2)])
    assert votes.task_outcomes() == {"t": True}
    assert not compare(votes, summary("x", [item("other", True)]), GateRules()).passed
