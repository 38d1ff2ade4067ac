"""The triggers' families, read from the database when ``/metrics`` is scraped:
``studio_webhook_deliveries_total`` (counter, by ``event`` and ``outcome``: a delivery's outcome
only moves forward, so each outcome's count is what it is now), ``studio_trigger_slots`` (gauge,
by ``state``) and ``studio_trigger_coalesced_total`` (counter: deliveries folded into a pending
follow-up)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False)  # hashed by identity (a registry keys its collectors)
class TriggerSnapshot:
    deliveries: Sequence[tuple[str, str, int]]  # (event, outcome, count)
    slots: Mapping[str, int]

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        deliveries = CounterMetricFamily("studio_webhook_deliveries",
                                         "GitHub webhook deliveries, by event and outcome.",
                                         labels=["event", "outcome"])
        for event, outcome, count in sorted(self.deliveries):
            deliveries.add_metric([event, outcome], count)
        yield deliveries
        slots = GaugeMetricFamily("studio_trigger_slots",
                                  "Pull-request and issue slots, by state.", labels=["state"])
        for state, count in sorted(self.slots.items()):
            slots.add_metric([state], count)
        yield slots
        yield CounterMetricFamily("studio_trigger_coalesced",
                                  "Deliveries coalesced into a pending follow-up.",
                                  value=sum(n for _, o, n in self.deliveries if o == "coalesced"))
