"""Which requested limits are above the deployment's ceiling (the rule a ``run`` token meets)."""

from __future__ import annotations

from services.api.limits import above_ceiling

CEILING = {"max_budget_usd": 2.0, "max_iterations": 24, "max_node_executions": 50}


def test_lower_or_equal_values_pass_and_higher_ones_are_named() -> None:
    assert above_ceiling({"max_budget_usd": 2.0, "max_iterations": 3}, CEILING) == {}
    assert above_ceiling({"max_budget_usd": 10_000, "max_iterations": 25}, CEILING) == {
        "max_budget_usd": {"requested": 10_000, "ceiling": 2.0},
        "max_iterations": {"requested": 25, "ceiling": 24}}


def test_values_are_compared_as_their_setting_takes_them() -> None:
    assert set(above_ceiling({"max_budget_usd": "1e4"}, CEILING)) == {"max_budget_usd"}
    assert above_ceiling({"max_budget_usd": "not a number"}, CEILING) == {}  # refused elsewhere
    assert above_ceiling({"max_node_executions": 51, "unknown": 10**9}, CEILING) == {
        "max_node_executions": {"requested": 51, "ceiling": 50}}
