"""Every numeric runtime setting has a type and bounds (issue 36, defect 1): a value of the
wrong type (``1.5`` for an integer, a bool, a string) or out of bounds (``-5``, ``0`` for
``max_iterations``; NaN or infinity) is refused naming the field and the bound, and nothing
else is changed: a value in bounds is answered as it is stored."""

from __future__ import annotations

import math
from typing import Any

import pytest

from services.db.runtime_settings import RUNTIME_SETTINGS, InvalidSettingValue, checked


@pytest.mark.parametrize(("key", "value", "details"), [
    ("max_iterations", 1.5, {"field": "max_iterations", "expected": "integer"}),
    ("max_iterations", "3", {"field": "max_iterations", "expected": "integer"}),
    ("max_iterations", True, {"field": "max_iterations", "expected": "integer"}),
    ("max_iterations", -5, {"field": "max_iterations", "minimum": 1, "unit": "model calls"}),
    ("max_iterations", 0, {"field": "max_iterations", "minimum": 1, "unit": "model calls"}),
    ("max_iterations", 10_001, {"field": "max_iterations", "maximum": 10_000,
                                "unit": "model calls"}),
    ("max_budget_usd", 0, {"field": "max_budget_usd", "exclusive_minimum": 0, "unit": "USD"}),
    ("max_budget_usd", "2", {"field": "max_budget_usd", "expected": "number"}),
    ("max_budget_usd", math.inf, {"field": "max_budget_usd", "maximum": 10_000, "unit": "USD"}),
    ("stall_s", -1.0, {"field": "stall_s", "exclusive_minimum": 0, "unit": "s"}),
    ("repo_daily_budget_usd", -0.01, {"field": "repo_daily_budget_usd", "minimum": 0,
                                      "unit": "USD"}),
    ("killswitch_engaged", "yes", {"field": "killswitch_engaged", "expected": "boolean"}),
])
def test_out_of_type_or_bounds_is_refused_naming_the_field_and_bound(
    key: str, value: Any, details: dict[str, Any]
) -> None:
    with pytest.raises(InvalidSettingValue) as caught:
        checked(key, value)
    assert caught.value.details == details
    assert key in str(caught.value)


def test_nan_is_refused() -> None:
    with pytest.raises(InvalidSettingValue):
        checked("wall_clock_s", math.nan)


@pytest.mark.parametrize(("key", "value", "stored"), [
    ("max_iterations", 1, 1), ("max_iterations", 10_000, 10_000),
    ("max_budget_usd", 3, 3.0), ("repo_daily_budget_usd", 0, 0.0),
    ("queued_timeout_s", 0.3, 0.3), ("killswitch_engaged", False, False),
])
def test_values_in_bounds_are_kept(key: str, value: Any, stored: Any) -> None:
    assert checked(key, value) == stored


def test_every_default_is_in_bounds_and_every_number_has_bounds() -> None:
    for key, spec in RUNTIME_SETTINGS.items():
        assert checked(key, spec.default) == spec.default
        if spec.type is not bool:
            assert spec.minimum is not None and spec.maximum is not None, key
            assert spec.unit, key
