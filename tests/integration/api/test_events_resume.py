"""The live stream: SSE from the journal, resumed with ``Last-Event-ID`` after a disconnect.

The run has a slow step (``command.run`` of ``sleep 2``): the client reads until the tool call
of that step, drops the connection while the command still runs, reconnects with the last id it
saw, and reads to the end. The union must be every journal event exactly once, in order, then
the ``end`` event: equal to a full replay read after the run.
"""

from __future__ import annotations

from tests.integration.api.helpers import SseEvent, create, read_all, slow_script, sse_events
from tests.integration.api.server import ApiServer


def _until_sleep_started(api: ApiServer, execution_id: str) -> list[SseEvent]:
    seen: list[SseEvent] = []
    with api.client(api.admin) as client, client.stream(
            "GET", f"/api/executions/{execution_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for event in sse_events(response):
            seen.append(event)
            call = event.data["data"].get("call") or {}
            if event.kind == "tool_call" and call.get("operation") == "run":
                break  # leaving the block closes the connection mid-run
    return seen


def test_a_client_that_reconnects_with_last_event_id_misses_nothing(api: ApiServer) -> None:
    execution_id = create(api, slow_script(2))
    first = _until_sleep_started(api, execution_id)
    assert first and first[-1].kind == "tool_call"
    second = read_all(api, execution_id, last_event_id=first[-1].id)
    union = first + second
    full = read_all(api, execution_id)

    assert second[0].id == first[-1].id + 1
    assert "tool_result" in [e.kind for e in second]  # the slow step ended after the disconnect
    journal = full[:-1]
    assert [e.id for e in union] == [e.id for e in full]
    assert [e.id for e in journal] == list(range(1, len(journal) + 1))
    assert [(e.kind, e.data) for e in union] == [(e.kind, e.data) for e in full]
    assert [e.kind for e in full].count("finished") == 1 and full[-1].kind == "end"
    for event in journal:
        assert event.data["seq"] == event.id and event.data["kind"] == event.kind


def test_reconnecting_after_the_end_gets_the_end_again(api: ApiServer) -> None:
    execution_id = create(api, slow_script(0))
    full = read_all(api, execution_id)
    assert full[-1].kind == "end" and full[-1].data["data"]["status"] == "succeeded"
    assert read_all(api, execution_id, last_event_id=full[-1].id) == [full[-1]]
    assert read_all(api, execution_id, last_event_id=full[-3].id) == full[-2:]


def test_finalization_steps_are_events_before_the_end(api: ApiServer) -> None:
    execution_id = create(api, slow_script(0))
    events = read_all(api, execution_id)
    kinds = [e.kind for e in events]
    steps = [e.data["data"] for e in events if e.kind == "finalize"]
    assert kinds.index("finished") < kinds.index("finalize") and kinds[-1] == "end"
    assert [s["step"] for s in steps] == ["commit", "push", "pull_request"]
    assert all(s["ok"] for s in steps)
    assert steps[0]["committed"] is True and steps[1]["pushed"] is True
    end = events[-1].data["data"]
    assert end["status"] == "succeeded" and end["branch"].startswith("studio/")
    assert end["head_sha"] == steps[1]["head_sha"] and len(end["head_sha"]) == 40
    assert set(end) >= {"pr_url", "usage", "cost_usd"}


def test_a_bad_last_event_id_is_invalid_arguments(api: ApiServer) -> None:
    execution_id = create(api, slow_script(0))
    with api.client(api.admin) as client:
        response = client.get(f"/api/executions/{execution_id}/events",
                              headers={"Last-Event-ID": "seven"})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_arguments"


def test_an_execution_that_fails_before_the_loop_still_ends_its_stream(api: ApiServer) -> None:
    body = {"repo_url": api.repo_url.replace("widgets", "missing"), "provider": "replay",
            "prompt": "p", "replay_script": slow_script(0)}
    with api.client(api.admin) as client:
        execution_id = client.post("/api/executions", json=body).json()["id"]
    events = read_all(api, execution_id)
    assert [e.kind for e in events] == ["finished", "end"]
    assert events[0].data["data"]["status"] == "failed"
    assert events[0].data["data"]["error"]["code"]
    assert events[1].data["data"]["status"] == "failed"
    assert events[1].data["data"]["error_code"] == events[0].data["data"]["error"]["code"]
