"""Whether a delivery runs: unknown, finished, a live lease (a redelivery), or run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from services.db.status import FINAL_STATUSES
from services.worker.admission import Admission, admit

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@dataclass
class Row:
    status: str
    lease_expires_at: datetime | None = None


@pytest.mark.parametrize(("row", "expected"), [
    (None, Admission.UNKNOWN),
    (Row("queued"), Admission.RUN),
    (Row("claimed", NOW + timedelta(seconds=30)), Admission.LEASE_HELD),
    (Row("running", NOW + timedelta(seconds=1)), Admission.LEASE_HELD),
    (Row("finalizing", NOW + timedelta(seconds=1)), Admission.LEASE_HELD),
    (Row("running", NOW - timedelta(seconds=1)), Admission.RUN),  # expired: take it over
    (Row("running", NOW), Admission.RUN),  # expires exactly now: expired
    (Row("awaiting_approval"), Admission.AWAITING_APPROVAL),  # a decision dispatches it
    (Row("running", (NOW + timedelta(seconds=5)).replace(tzinfo=None)), Admission.LEASE_HELD),
    *[(Row(status, NOW + timedelta(hours=1)), Admission.FINISHED)
      for status in sorted(FINAL_STATUSES)],
    *[(Row(status), Admission.FINISHED) for status in sorted(FINAL_STATUSES)],
])
def test_admission(row: Row | None, expected: Admission) -> None:
    assert admit(row, NOW) is expected
