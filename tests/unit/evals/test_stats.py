"""Wilson intervals and the exact McNemar (sign) test against values computed by hand."""

from __future__ import annotations

import pytest

from services.evals.stats import binomial_tail, paired, wilson


def test_wilson_matches_the_textbook_values() -> None:
    low, high = wilson(10, 11)
    assert (round(low, 3), round(high, 3)) == (0.623, 0.984)
    low, high = wilson(0, 10)
    assert low == pytest.approx(0.0, abs=1e-12) and round(high, 3) == 0.278
    assert wilson(0, 0) == (0.0, 1.0)
    narrow, wide = wilson(50, 100), wilson(5, 10)
    assert wide[0] < narrow[0] < 0.5 < narrow[1] < wide[1]  # more trials, narrower


@pytest.mark.parametrize(("k", "n", "p"), [(0, 0, 1.0), (5, 5, 1 / 32), (4, 5, 6 / 32),
                                           (0, 3, 1.0), (3, 3, 0.125)])
def test_binomial_tail(k: int, n: int, p: float) -> None:
    assert binomial_tail(k, n) == pytest.approx(p)


def test_paired_counts_only_common_tasks() -> None:
    result = paired({"a": True, "b": True, "c": False, "only-base": True},
                    {"a": False, "b": True, "c": True, "only-new": False})
    assert (result.lost, result.gained, result.both, result.neither) == (1, 1, 1, 0)
    assert result.p_worse == pytest.approx(0.75)
