"""SSE: once a client has read the stream to its ``end`` event, the execution's final status is
visible to ``GET /api/executions/{id}`` at once, every time.

Many runs are started together (the API runs two at a time, so the others are still queued or
finalizing while a stream is read), each stream is read to its end by its own thread, and each
reader asks for the execution right after the stream closed, without waiting or retrying.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.integration.api.helpers import FINAL, create, read_all, slow_script
from tests.integration.api.server import ApiServer

RUNS = 12


def _read_then_get(api: ApiServer, execution_id: str) -> tuple[str, dict[str, object], str]:
    events = read_all(api, execution_id)
    with api.client(api.admin) as client:
        row = client.get(f"/api/executions/{execution_id}").json()
    end = events[-1]
    assert end.kind == "end", [e.kind for e in events]
    return str(row["status"]), dict(end.data["data"]), str(row["head_sha"])


def test_after_the_end_event_the_execution_shows_its_final_status(api: ApiServer) -> None:
    ids = [create(api, slow_script(0)) for _ in range(RUNS)]
    with ThreadPoolExecutor(max_workers=RUNS) as pool:
        seen = list(pool.map(lambda execution_id: _read_then_get(api, execution_id), ids))
    for status, end, head_sha in seen:
        assert status in FINAL and status == end["status"] == "succeeded"
        assert end["head_sha"] == head_sha and head_sha
