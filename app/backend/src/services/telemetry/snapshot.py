"""Families read from the database when ``/metrics`` is scraped (the API's): what is recorded
now, whichever process recorded it.

``studio_executions`` (gauge, by ``status``); ``studio_executions_finished_total`` (counter, by
final ``status``: a final status never changes, so it only grows); ``studio_tool_calls_total``
(counter, by ``outcome``: ``ok``, an error code, or ``pending``); ``studio_queue_depth`` (gauge:
executions queued, not yet claimed); ``studio_executions_running`` (gauge: claimed, running or
finalizing); ``studio_team_budget_spent_ratio`` (gauge, by ``team``: the month's spend over
the team's monthly budget, 1.0 at the budget);
``studio_oldest_waiting_seconds`` (gauge, by ``state``: ``queued``,
``waiting_to_retry``, ``awaiting_approval``: how long the oldest execution in that state has
waited, 0 when none) and ``studio_dead_letter_depth`` (gauge: executions dead-lettered), what
the chart's alerts watch (F8).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

ACTIVE_STATUSES = ("claimed", "running", "finalizing")


@dataclass(frozen=True, eq=False)  # hashed by identity (a registry keys its collectors)
class DatabaseSnapshot:
    """A collector (``prometheus_client``'s protocol: ``collect()``) over counts read once."""

    executions: Mapping[str, int]
    tool_calls: Mapping[str, int]
    statuses: Sequence[str]
    final_statuses: Sequence[str]
    # per team: the month's spend over its monthly budget (teams with a budget only)
    team_spend_ratio: Mapping[str, float] = field(default_factory=dict)
    oldest: Mapping[str, float] = field(default_factory=dict)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        known = sorted(set(self.statuses) | set(self.executions))
        by_status = GaugeMetricFamily("studio_executions", "Executions recorded, by status.",
                                      labels=["status"])
        for status in known:
            by_status.add_metric([status], self.executions.get(status, 0))
        yield by_status
        finished = CounterMetricFamily("studio_executions_finished",
                                       "Executions that ended, by final status.",
                                       labels=["status"])
        for status in self.final_statuses:
            finished.add_metric([status], self.executions.get(status, 0))
        yield finished
        calls = CounterMetricFamily("studio_tool_calls", "Tool calls recorded, by outcome.",
                                    labels=["outcome"])
        for outcome, count in sorted(self.tool_calls.items()):
            calls.add_metric([outcome], count)
        yield calls
        yield GaugeMetricFamily("studio_queue_depth", "Executions queued, not yet claimed.",
                                value=self.executions.get("queued", 0))
        yield GaugeMetricFamily("studio_executions_running",
                                "Executions claimed, running or finalizing.",
                                value=sum(self.executions.get(s, 0) for s in ACTIVE_STATUSES))
        teams = GaugeMetricFamily("studio_team_budget_spent_ratio",
                                  "A team's spend this UTC month over its monthly budget.",
                                  labels=["team"])
        for team, ratio in sorted(self.team_spend_ratio.items()):
            teams.add_metric([team], ratio)
        yield teams
        oldest = GaugeMetricFamily(
            "studio_oldest_waiting_seconds",
            "Age of the oldest execution in each waiting state (0 when none).", labels=["state"])
        for state, age in sorted(self.oldest.items()):
            oldest.add_metric([state], age)
        yield oldest
        yield GaugeMetricFamily("studio_dead_letter_depth",
                                "Executions dead-lettered, waiting for an operator.",
                                value=self.executions.get("dead_lettered", 0))
