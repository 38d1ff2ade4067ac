"""The legacy runtime's model proxy: it forwards a model call carrying this execution's token to
the provider with the real key, and nothing else.

The provider is the scripted model server (real HTTP); the proxy is reached over real sockets,
both ways it is in production: listening on the loopback (unconfined) and handed connections
over a Unix socket with ``SCM_RIGHTS`` (the sandbox's relay). Hostile requests: no token, the
wrong one, the token in the wrong place, a path that is not a model call (another API, ``..``,
percent-encoding, an absolute-form target), an oversized body; none reaches the provider.
"""

from __future__ import annotations

import array
import http.client
import json
import socket
from collections.abc import Iterator

import pytest

from services.execution.legacy.keyproxy import MAX_BODY_BYTES, KeyProxy, ModelRoute
from tests.support.model_script import text
from tests.support.model_server import ScriptedModelServer

KEY = "sk-proxy-real-KEY-31d0c5a9e7"
PATHS = (r"/v1/messages(/count_tokens)?",)
BODY = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 10,
                   "messages": [{"role": "user", "content": "hi"}]})


@pytest.fixture
def server() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer([text("one"), text("two"), text("three")]) as started:
        yield started


@pytest.fixture
def proxy(server: ScriptedModelServer) -> Iterator[KeyProxy]:
    with KeyProxy(ModelRoute(server.url, "x-api-key", KEY, PATHS), {}) as started:
        yield started


def _post(origin: str, path: str, headers: dict[str, str], body: str = BODY
          ) -> tuple[int, bytes]:
    host, port = origin.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"content-type": "application/json",
                                                        **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_a_model_call_with_the_token_reaches_the_provider_with_the_key_alone(
        server: ScriptedModelServer, proxy: KeyProxy) -> None:
    origin = proxy.listen()
    status, body = _post(origin, "/v1/messages?beta=true",
                         {"x-api-key": proxy.token, "authorization": f"Bearer {proxy.token}",
                          "x-goog-api-key": "other", "anthropic-version": "2023-06-01"})
    assert status == 200 and b"one" in body
    [record] = server.requests_for("anthropic")
    assert record.headers["x-api-key"] == KEY
    assert "authorization" not in record.headers and "x-goog-api-key" not in record.headers
    assert record.headers["anthropic-version"] == "2023-06-01"
    assert proxy.token not in json.dumps(record.headers) and record.query == "beta=true"
    assert KEY not in proxy.token and KEY not in repr(proxy.route)


@pytest.mark.parametrize("headers", [
    {}, {"x-api-key": "studio-guess"}, {"x-api-key": KEY},
    {"authorization": "Basic c3R1ZGlvOnRvaw=="}, {"x-other": "TOKEN"},
])
def test_a_request_without_the_token_is_refused_before_the_provider(
        server: ScriptedModelServer, proxy: KeyProxy, headers: dict[str, str]) -> None:
    origin = proxy.listen()
    headers = {k: (proxy.token if v == "TOKEN" else v) for k, v in headers.items()}
    status, body = _post(origin, "/v1/messages", headers)
    assert status == 401 and KEY.encode() not in body
    assert server.requests == []


@pytest.mark.parametrize("path", [
    "/v1/files", "/v1/organizations/api_keys", "/v1/messages/../files", "/v1/%6d%65ssages",
    "/v1/messages/batches", "http://127.0.0.2:9/v1/messages", "/v1/messages\\..", "*",
])
def test_a_path_that_is_not_a_model_call_is_refused(
        server: ScriptedModelServer, proxy: KeyProxy, path: str) -> None:
    origin = proxy.listen()
    status, _ = _post(origin, path, {"x-api-key": proxy.token})
    assert status == 403
    assert server.requests == []


def test_the_key_query_parameter_is_a_credential_not_forwarded(
        server: ScriptedModelServer) -> None:
    route = ModelRoute(server.url, "x-goog-api-key", KEY,
                       (r"/v1beta/models/[A-Za-z0-9._-]+:generateContent",))
    with KeyProxy(route, {}) as proxy:
        origin = proxy.listen()
        status, _ = _post(origin, f"/v1beta/models/gemini-2.5-pro:generateContent"
                                  f"?key={proxy.token}&alt=json", {},
                          json.dumps({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}))
    assert status == 200
    [record] = server.requests_for("gemini")
    assert record.headers["x-goog-api-key"] == KEY
    assert "key=" not in record.query and "alt=json" in record.query


def test_an_oversized_body_is_refused(server: ScriptedModelServer, proxy: KeyProxy) -> None:
    origin = proxy.listen()
    try:
        status, _ = _post(origin, "/v1/messages", {"x-api-key": proxy.token},
                          "x" * (MAX_BODY_BYTES + 1))
    except (ConnectionError, http.client.HTTPException):
        status = 413  # the proxy may close before the client has sent it all
    assert status == 413
    assert server.requests == []


def test_a_provider_path_prefix_is_kept_and_required(server: ScriptedModelServer) -> None:
    route = ModelRoute(server.url + "/v1", "authorization", f"Bearer {KEY}",
                       (r"/responses",))
    body = json.dumps({"model": "gpt-5.1", "input": "hi"})
    with KeyProxy(route, {}) as proxy:
        origin = proxy.listen()
        assert proxy.base_url(origin) == origin + "/v1"
        assert _post(origin, "/responses", {"authorization": f"Bearer {proxy.token}"},
                     body)[0] == 403
        status, _ = _post(origin, "/v1/responses", {"authorization": f"Bearer {proxy.token}"},
                          body)
    assert status == 200
    [record] = server.requests_for("openai")
    assert record.headers["authorization"] == f"Bearer {KEY}"


def test_connections_handed_over_a_unix_socket_are_served(
        server: ScriptedModelServer, proxy: KeyProxy) -> None:
    """The sandbox's relay: it accepts on its own loopback and sends the descriptor."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proxy.accept_from(ours)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    client = socket.create_connection(listener.getsockname()[:2])
    accepted, _ = listener.accept()
    theirs.sendmsg([b"c"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                             array.array("i", [accepted.fileno()]))])
    accepted.close()
    client.sendall(f"POST /v1/messages HTTP/1.1\r\nhost: x\r\nx-api-key: {proxy.token}\r\n"
                   f"content-type: application/json\r\ncontent-length: {len(BODY)}\r\n"
                   f"connection: close\r\n\r\n{BODY}".encode())
    client.settimeout(30)
    reply = b""
    while chunk := client.recv(65536):
        reply += chunk
    client.close()
    listener.close()
    theirs.close()
    assert reply.startswith(b"HTTP/1.1 200") and b"one" in reply
    assert server.requests_for("anthropic")[0].headers["x-api-key"] == KEY


def test_the_upstream_must_be_an_http_url() -> None:
    for bad in ("file:///etc/passwd", "ftp://h/x", "http://", "127.0.0.1:9"):
        with pytest.raises(ValueError):
            KeyProxy(ModelRoute(bad, "x-api-key", KEY, PATHS), {})
