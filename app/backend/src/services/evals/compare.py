"""``studio eval compare BASE NEW --gate``: a paired comparison of two eval runs, and the gate.

Tasks are paired by id (a task counts as resolved in a run when most of its graded attempts
were). The gate fails when

* the pass rate over the common tasks dropped by more than ``max_drop`` **and** the one-sided
  exact McNemar test says the drop is significant (``p < alpha``), or
* the mean cost per task rose by more than ``max_cost_increase`` (a fraction of the baseline's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from services.evals.reports import money, percent
from services.evals.stats import Paired, paired, wilson
from services.evals.summary import RunSummary


@dataclass(frozen=True)
class GateRules:
    max_drop: float = 0.0
    alpha: float = 0.05
    max_cost_increase: float = 0.25


@dataclass(frozen=True)
class Comparison:
    tasks: int
    base_rate: float
    new_rate: float
    base_ci: tuple[float, float]
    new_ci: tuple[float, float]
    pairs: Paired
    base_cost: float
    new_cost: float
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def compare(base: RunSummary, new: RunSummary, rules: GateRules) -> Comparison:
    base_tasks, new_tasks = base.task_outcomes(), new.task_outcomes()
    common = sorted(set(base_tasks) & set(new_tasks))
    pairs = paired(base_tasks, new_tasks)
    base_ok = sum(base_tasks[t] for t in common)
    new_ok = sum(new_tasks[t] for t in common)
    n = len(common)
    base_rate, new_rate = (base_ok / n, new_ok / n) if n else (0.0, 0.0)
    failures = []
    if n == 0:
        failures.append("the runs have no task in common")
    drop = base_rate - new_rate
    if n and drop > rules.max_drop and pairs.p_worse < rules.alpha:
        failures.append(f"pass rate dropped {percent(drop)} (more than {percent(rules.max_drop)}"
                        f"; exact McNemar p={pairs.p_worse:.4f} < {rules.alpha})")
    base_cost, new_cost = base.cost_per_task(), new.cost_per_task()
    if new_cost > base_cost * (1 + rules.max_cost_increase) and new_cost > 0:
        failures.append(f"cost per task rose from {money(base_cost)} to {money(new_cost)} "
                        f"(more than {percent(rules.max_cost_increase)})")
    return Comparison(n, base_rate, new_rate, wilson(base_ok, n), wilson(new_ok, n), pairs,
                      base_cost, new_cost, failures)


def comparison_text(base: RunSummary, new: RunSummary, result: Comparison) -> str:
    def rate(value: float, ci: tuple[float, float]) -> str:
        return f"{percent(value)} (95% CI {percent(ci[0])}-{percent(ci[1])})"

    pairs = result.pairs
    lines = [f"base {base.run.id}: pass rate {rate(result.base_rate, result.base_ci)}, "
             f"cost/task {money(result.base_cost)}",
             f"new  {new.run.id}: pass rate {rate(result.new_rate, result.new_ci)}, "
             f"cost/task {money(result.new_cost)}",
             f"{result.tasks} common tasks: {pairs.lost} lost, {pairs.gained} gained, "
             f"{pairs.both} both, {pairs.neither} neither; exact McNemar p(worse)="
             f"{pairs.p_worse:.4f}"]
    lines += [f"GATE FAILED: {f}" for f in result.failures] or ["gate passed"]
    return "\n".join(lines) + "\n"
