"""The statistics of the reports and the gate: Wilson score intervals for a pass rate and the
exact (binomial) McNemar test for paired outcomes over the same tasks. Standard library only."""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist


def wilson(successes: int, trials: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / trials`` (``(0, 1)`` without a trial)."""
    if trials <= 0:
        return 0.0, 1.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def binomial_tail(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2)."""
    if k <= 0:
        return 1.0
    return float(sum(math.comb(n, i) for i in range(k, n + 1)) / 2 ** n)


@dataclass(frozen=True)
class Paired:
    """Tasks resolved by the baseline only (``lost``), by the new run only (``gained``), and
    the one-sided exact McNemar p-value of "the new run resolves fewer"."""

    lost: int
    gained: int
    both: int
    neither: int

    @property
    def p_worse(self) -> float:
        return binomial_tail(self.lost, self.lost + self.gained)


def paired(base: dict[str, bool], new: dict[str, bool]) -> Paired:
    """Compare over the tasks both runs have."""
    common = sorted(set(base) & set(new))
    lost = sum(1 for t in common if base[t] and not new[t])
    gained = sum(1 for t in common if new[t] and not base[t])
    both = sum(1 for t in common if base[t] and new[t])
    return Paired(lost, gained, both, len(common) - lost - gained - both)
