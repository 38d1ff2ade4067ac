"""Runtime settings over real HTTP (issue 36, defect 1): out-of-range or mistyped values are
refused with 422 ``invalid_arguments`` naming the field and the bound, and the stored value
stays what it was; the operators' listing carries each bound; DELETE puts the default back."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.api.server import ApiServer


def _stored(api: ApiServer, key: str) -> dict[str, Any]:
    with api.client(api.admin) as client:
        listed = client.get("/api/operator/settings").json()["settings"]
    return next(item for item in listed if item["key"] == key)


@pytest.mark.parametrize(("value", "bound"), [
    (1.5, {"expected": "integer"}), (-5, {"minimum": 1}), (0, {"minimum": 1}),
    (10_001, {"maximum": 10_000}), ("12", {"expected": "integer"}),
])
def test_max_iterations_out_of_range_is_refused_with_the_bound(
    api: ApiServer, value: Any, bound: dict[str, Any]
) -> None:
    before = _stored(api, "max_iterations")
    with api.client(api.admin) as client:
        answer = client.put("/api/settings/max_iterations", json={"value": value})
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_arguments"
    assert error["details"]["field"] == "max_iterations"
    for name, bound_value in bound.items():
        assert error["details"][name] == bound_value
    assert "max_iterations" in error["message"]
    assert _stored(api, "max_iterations") == before


def test_the_listing_has_bounds_and_delete_resets_to_the_default(api: ApiServer) -> None:
    described = _stored(api, "max_iterations")
    assert (described["minimum"], described["maximum"], described["unit"]) == (
        1, 10_000, "model calls")
    assert _stored(api, "stall_s")["exclusive_minimum"] is True
    with api.client(api.admin) as client:
        assert client.put("/api/settings/max_iterations", json={"value": 7}).json()["value"] == 7
        assert _stored(api, "max_iterations")["source"] == "runtime_setting"
        reset = client.delete("/api/settings/max_iterations")
        assert reset.status_code == 200 and reset.json() == {"key": "max_iterations",
                                                             "value": 24}
        assert client.delete("/api/settings/no_such_key").status_code == 404
    assert _stored(api, "max_iterations") == {**described, "value": 24, "source": "default"}
