"""How a Job's status reads as a substrate status (conditions first, then pod counters)."""

from __future__ import annotations

import pytest
from kubernetes import client

from services.executors.base import SubstrateStatus
from services.executors.kubernetes import job_status


def job(**status: object) -> client.V1Job:
    return client.V1Job(status=client.V1JobStatus(**status)) if status else client.V1Job()


def condition(kind: str, value: str = "True") -> client.V1JobCondition:
    return client.V1JobCondition(type=kind, status=value)


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ({}, SubstrateStatus.PENDING),
        ({"active": 1, "ready": 0}, SubstrateStatus.PENDING),
        ({"active": 1, "ready": 1}, SubstrateStatus.RUNNING),
        ({"active": 1}, SubstrateStatus.RUNNING),
        ({"succeeded": 1}, SubstrateStatus.SUCCEEDED),
        ({"failed": 1}, SubstrateStatus.FAILED),
        ({"conditions": [condition("Complete")]}, SubstrateStatus.SUCCEEDED),
        ({"conditions": [condition("SuccessCriteriaMet")], "active": 1}, SubstrateStatus.SUCCEEDED),
        ({"conditions": [condition("Failed")]}, SubstrateStatus.FAILED),
        ({"conditions": [condition("FailureTarget")], "active": 1}, SubstrateStatus.FAILED),
        ({"conditions": [condition("Failed", "False")], "active": 1, "ready": 1},
         SubstrateStatus.RUNNING),
        ({"conditions": [condition("Suspended")]}, SubstrateStatus.PENDING),
    ],
)
def test_job_status(status: dict[str, object], expected: SubstrateStatus) -> None:
    assert job_status(job(**status)) is expected


def test_only_succeeded_and_failed_are_finished() -> None:
    assert {s for s in SubstrateStatus if s.finished} == {
        SubstrateStatus.SUCCEEDED,
        SubstrateStatus.FAILED,
    }
