"""The typed payload of ``studio.execute_node``: what a message must hold."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from services.worker.payloads import ExecuteNodePayload, InvalidPayload, ReapPayload, parse

GOOD = "0b9a3c43-4b43-4a43-9c44-1f2e3d4c5b6a"


def test_a_uuid_is_accepted_and_round_trips() -> None:
    payload = parse(ExecuteNodePayload, {"execution_id": GOOD})
    assert payload.execution_id == uuid.UUID(GOOD)
    assert payload.message() == {"execution_id": GOOD}
    assert parse(ExecuteNodePayload, payload.message()) == payload


def test_the_canonical_form_is_sent() -> None:
    assert parse(ExecuteNodePayload, {"execution_id": GOOD.upper()}).message() == {
        "execution_id": GOOD}


@pytest.mark.parametrize(("kwargs", "reason"), [
    ({}, "execution_id: Field required"),
    ({"execution_id": "not-a-uuid"}, "execution_id: Input should be a valid UUID"),
    ({"execution_id": "../../etc/passwd"}, "execution_id: Input should be a valid UUID"),
    ({"execution_id": 42}, "execution_id: UUID input should be a string"),
    ({"execution_id": GOOD, "workspace": "/tmp"}, "workspace: Extra inputs are not permitted"),
])
def test_invalid_messages_are_refused_with_the_reason(kwargs: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidPayload) as caught:
        parse(ExecuteNodePayload, kwargs)
    assert reason in str(caught.value)


def test_reap_takes_no_arguments() -> None:
    assert parse(ReapPayload, {}) == ReapPayload()
    with pytest.raises(InvalidPayload, match="Extra inputs"):
        parse(ReapPayload, {"limit": 5})
