"""Bodies against a running ``studio api``: authentication comes before the body is read (401,
never 422, for an unauthenticated caller), a body over the cap is 413 and the API's memory stays
bounded, and a ``run`` token may lower an execution's limits but not raise them."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from urllib.parse import urlsplit

from tests.integration.api.server import ApiServer

MIB = 1024 * 1024
CAP = 4 * MIB  # the documented default of STUDIO_API_MAX_BODY_BYTES


def _raw(api: ApiServer, head: str, body: bytes = b"", timeout: float = 60) -> tuple[int, dict]:
    """Send ``head`` (and ``body``) on a fresh connection; the status and JSON of the answer."""
    parts = urlsplit(api.url)
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.sendall(head.encode("latin-1") + body)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _expected(data):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
    header, _, payload = data.partition(b"\r\n\r\n")
    return int(header.split()[1]), json.loads(payload or b"{}")


def _expected(data: bytes) -> int:
    header, _, _ = data.partition(b"\r\n\r\n")
    for line in header.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(header) + 4 + int(line.split(b":")[1])
    return 0


def _post(path: str, length: int, token: str | None = None) -> str:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n{auth}"
            f"Content-Length: {length}\r\nConnection: close\r\n\r\n")


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_an_unauthenticated_body_is_401_before_it_is_read_or_parsed(api: ApiServer) -> None:
    """Finding 4: a 40 MB unauthenticated body got 422 (it was read and parsed first)."""
    status, body = _raw(api, _post("/api/executions", 40 * MIB), b"{not json")
    assert status == 401 and body["error"]["code"] == "unauthorized", body
    with api.client() as client:
        malformed = client.post("/api/flowcharts", content=b"{not json",
                                headers={"Content-Type": "application/json"})
        wrong = client.post("/api/executions", json={"nonsense": 1},
                            headers={"Authorization": "Bearer not-a-token"})
    assert malformed.status_code == 401 and wrong.status_code == 401
    assert malformed.headers["WWW-Authenticate"] == "Bearer"
    assert wrong.json()["error"]["code"] == "unauthorized"


def test_a_body_over_the_cap_is_413_and_memory_stays_bounded(api: ApiServer) -> None:
    token = api.token("runner", ["read", "run"])
    status, body = _raw(api, _post("/api/executions", 300 * MIB, token))
    assert status == 413, body
    assert body["error"]["code"] == "request_too_large"
    assert body["error"]["details"]["max_body_bytes"] == CAP
    before = _rss_mib(api.process.pid)
    _stream_chunked(api, token, 300 * MIB)
    grown = _rss_mib(api.process.pid) - before
    assert grown < 100, f"the API grew by {grown:.0f} MiB reading a 300 MiB body"


def _stream_chunked(api: ApiServer, token: str, total: int) -> None:
    """Send ``total`` bytes chunked (no length declared) until the server stops reading."""
    parts = urlsplit(api.url)
    head = (f"POST /api/flowcharts HTTP/1.1\r\nHost: api\r\nContent-Type: application/json\r\n"
            f"Authorization: Bearer {token}\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"%x\r\n%s\r\n" % (MIB, b" " * MIB)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(head.encode())
        sent = threading.Event()

        def send() -> None:
            try:
                for _ in range(total // MIB):
                    sock.sendall(chunk)
            except OSError:
                pass  # the server answered 413 and closed: it read no further
            sent.set()

        threading.Thread(target=send, daemon=True).start()
        try:
            answer = sock.recv(4096)
        except OSError:
            answer = b""
        sent.wait(60)
    assert answer == b"" or answer.split()[1] == b"413", answer[:200]


def test_a_run_token_may_lower_an_executions_limits_but_not_raise_them(api: ApiServer) -> None:
    runner = api.token("runner", ["read", "run"])
    body = {"repo_url": api.repo_url, "provider": "replay", "prompt": "p",
            "replay_script": {"turns": [{"final": "done"}]}}
    with api.client(runner) as client:
        rich = client.post("/api/executions", json={**body, "limits": {"max_budget_usd": 10_000}})
        long = client.post("/api/executions", json={**body, "limits": {"wall_clock_s": 86_400}})
        cheap = client.post("/api/executions", json={**body, "limits": {"max_budget_usd": 0.5}})
    assert rich.status_code == 403, rich.text
    assert rich.json()["error"]["code"] == "limit_above_ceiling"
    assert rich.json()["error"]["details"]["limits"] == {
        "max_budget_usd": {"requested": 10_000.0, "ceiling": 2.0}}
    assert long.status_code == 403
    assert cheap.status_code == 202, cheap.text
    with api.client(api.admin) as client:
        assert client.post("/api/executions", json={**body, "limits": {
            "max_budget_usd": 10_000}}).status_code == 202
