"""Responses are gzip-compressed for clients that accept it (issue 36): the page, its scripts
and JSON of 1 KiB or more; a small answer and the event stream are not (each event must
arrive as it is sent); a client that does not ask gets plain bytes."""

from __future__ import annotations

from tests.integration.api.helpers import create, slow_script, wait_final
from tests.integration.api.server import ApiServer

GZIP = {"Accept-Encoding": "gzip"}
GZIP_MAGIC = b"\x1f\x8b"


def test_pages_scripts_and_json_are_compressed_when_asked(api: ApiServer) -> None:
    with api.client(api.admin) as client:
        for path in ("/", "/static/run_page.js", "/static/vendor/dagre.min.js",
                     "/api/providers"):
            answer = client.get(path, headers=GZIP)
            assert answer.status_code == 200, path
            assert answer.headers.get("content-encoding") == "gzip", path
            assert answer.content and not answer.content.startswith(GZIP_MAGIC)  # decoded
        plain = client.get("/api/providers", headers={"Accept-Encoding": "identity"})
        assert "content-encoding" not in plain.headers
        assert plain.json() == client.get("/api/providers", headers=GZIP).json()
        small = client.get("/api/killswitch", headers=GZIP)
        assert "content-encoding" not in small.headers  # under 1 KiB: as it is


def test_the_event_stream_is_never_compressed(api: ApiServer) -> None:
    execution_id = create(api, slow_script(1))
    wait_final(api, execution_id)
    with api.client(api.admin) as client, client.stream(
            "GET", f"/api/executions/{execution_id}/events", headers=GZIP) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in stream.headers
        raw = b"".join(stream.iter_raw())
    assert not raw.startswith(GZIP_MAGIC) and b"event: end" in raw
