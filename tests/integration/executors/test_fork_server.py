"""The fork server against hostile requests: it ignores what it cannot read and keeps serving.

Its control socket is private to the worker (a socket pair), but a bug on the worker's side must
not take it down with every running execution. Each test ends with a valid request served (the
witness that the server survived); the malformed requests' children, when there are any, end
with a failure status rather than hang.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.db.executions import ExecutionRepository
from services.db.redaction import Redactor
from services.db.session import open_database
from services.executors.base import SubstrateStatus
from services.executors.forked import LENGTH, ForkedSubstrate, ForkServer
from services.runs.request import ExecutionRequest, create_execution
from services.settings import get_settings
from services.worker import child
from services.worker.admission import Admission
from services.worker.child import use_fork_server
from services.worker.handlers import handle_execute_node
from services.worker.payloads import ExecuteNodePayload, parse
from services.worker.runner import process_model
from tests.integration.celery_fixtures import writable_memory

UNKNOWN_ID = "3d6f0b9e-0000-4000-8000-00000000f0f0"
PATIENCE_S = 60.0


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    """One server for the module: each test also shows it survived the ones before."""
    started = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    yield started
    started.stop()


def a_valid_fork_fails_cleanly(server: ForkServer, tmp_path: Path,
                               provider: str | None = None, mcp: bool = False) -> None:
    """A real ``studio execute`` of an id no database knows: it ends (exit 2), reported."""
    substrate = ForkedSubstrate(server, {
        "PATH": os.environ["PATH"], "HOME": str(tmp_path),
        "STUDIO_DATABASE_URL": f"sqlite:///{tmp_path / 'studio.db'}",
        "STUDIO_DATA_DIR": str(tmp_path / "data")}, provider=provider, mcp=mcp)
    handle = substrate.launch(UNKNOWN_ID)
    assert substrate.wait(handle, PATIENCE_S) is SubstrateStatus.FAILED
    assert server.alive()


def send(server: ForkServer, message: bytes, fds: list[int]) -> None:
    socket.send_fds(server._control, [message], fds)


@pytest.mark.parametrize("message", [b"not json", b"{}", b'{"execution_id": null}x', b"[1, 2]",
                                     b"\x00\xff" * 100])
def test_malformed_requests_are_ignored(server: ForkServer, tmp_path: Path,
                                        message: bytes) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    send(server, message, [theirs.fileno()])
    theirs.close()
    ours.settimeout(PATIENCE_S)
    assert ours.recv(64) == b""  # no child: the server closed its end without answering
    a_valid_fork_fails_cleanly(server, tmp_path)


def test_requests_with_no_socket_or_two_are_ignored(server: ForkServer, tmp_path: Path) -> None:
    request = json.dumps({"execution_id": UNKNOWN_ID}).encode()
    send(server, request, [])
    first, second = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    send(server, request, [first.fileno(), second.fileno()])
    first.close()
    second.settimeout(PATIENCE_S)
    assert second.recv(64) == b""
    a_valid_fork_fails_cleanly(server, tmp_path)


def framed(body: bytes) -> bytes:
    return LENGTH.pack(len(body)) + body


@pytest.mark.parametrize("payload", [
    framed(b"{env:"),  # not JSON
    framed(b'{"env": [1]}'),  # not a mapping
    framed(b'{"env": {"A": 1}}'),  # a value that is not a string
    framed(b'{"no env": {}}'),  # no environment at all
    LENGTH.pack(1 << 30),  # larger than any environment
    b"",  # the slot goes away without sending anything
])
def test_a_malformed_environment_ends_that_child_only(server: ForkServer, tmp_path: Path,
                                                      payload: bytes) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    send(server, json.dumps({"execution_id": UNKNOWN_ID}).encode(), [theirs.fileno()])
    theirs.close()
    ours.settimeout(PATIENCE_S)
    reply = b""
    while not reply.endswith(b"\n"):
        reply += ours.recv(64)
    assert "pid" in json.loads(reply)
    if payload:
        ours.sendall(payload)
    else:
        ours.shutdown(socket.SHUT_WR)
    status = b""
    while not status.endswith(b"\n"):
        chunk = ours.recv(64)
        assert chunk, "the server closed the channel without the child's status"
        status += chunk
    assert json.loads(status)["exit"] != 0
    ours.close()
    a_valid_fork_fails_cleanly(server, tmp_path)


def test_ready_never_waits_for_the_warm_up(tmp_path: Path) -> None:
    """A slot asks :meth:`ForkServer.ready` and execs its child while the answer is no: the
    question answers at once while the server imports, and yes once it has said so."""
    warming = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, wait=False)
    try:
        asked = time.monotonic()
        assert not warming.ready()  # an interpreter's imports take far longer than a question
        assert time.monotonic() - asked < 1.0
        deadline = time.monotonic() + PATIENCE_S
        while not warming.ready():  # positive control: it does get ready
            assert time.monotonic() < deadline, "the fork server never said ready"
            time.sleep(0.05)
        assert warming.alive()
        a_valid_fork_fails_cleanly(warming, tmp_path)
    finally:
        warming.stop()


def test_a_server_not_ready_in_time_is_given_up() -> None:
    late = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"}, wait=False,
                            timeout_s=0.0)
    try:
        assert not late.ready()
        assert not late.alive()  # stopped: the worker execs every child from then on
        assert not late.ready()
    finally:
        late.stop()


# Bytes that sit in a process's memory once it imported that SDK, or the MCP client (module
# names, paths), and in a fork server's memory of before, which imported them all before it said
# ready.
SDK_NEEDLES = {"codex": b"openai._client", "gemini": b"google.genai",
               "claude": b"claude_agent_sdk._internal",
               "mcp": b"services.execution.mcp.http_guard"}


def sdks_in(pid: int) -> set[str]:
    memory = writable_memory(pid)
    return {provider for provider, needle in SDK_NEEDLES.items() if needle in memory}


def test_a_server_loads_only_the_sdks_its_executions_name(tmp_path: Path) -> None:
    """Ready, the server holds no provider's SDK and no MCP client; after two codex executions
    it holds the OpenAI SDK and nothing else of them; the first execution that may use MCP loads
    the MCP client, the first gemini one Gemini's SDK, the first claude one Claude's (the
    positive controls of the scan: it finds what is there). Witness: a server of before holds
    all four as soon as it is ready. A request's provider field that no profile knows is
    ignored and its child forked all the same."""
    fresh = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    try:
        assert sdks_in(fresh.pid) == set()
        for _ in range(2):
            a_valid_fork_fails_cleanly(fresh, tmp_path, provider="codex")
        assert sdks_in(fresh.pid) == {"codex"}
        for odd in ("replay", "no-such-provider", "../../os"):
            a_valid_fork_fails_cleanly(fresh, tmp_path, provider=odd)
        assert sdks_in(fresh.pid) == {"codex"}
        a_valid_fork_fails_cleanly(fresh, tmp_path, provider="replay", mcp=True)
        assert sdks_in(fresh.pid) == {"codex", "mcp"}
        a_valid_fork_fails_cleanly(fresh, tmp_path, provider="gemini")
        assert sdks_in(fresh.pid) == {"codex", "mcp", "gemini"}
        a_valid_fork_fails_cleanly(fresh, tmp_path, provider="claude")
        assert sdks_in(fresh.pid) == set(SDK_NEEDLES)
    finally:
        fresh.stop()


def test_a_provider_field_that_is_not_a_name_is_ignored(server: ForkServer,
                                                         tmp_path: Path) -> None:
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    request = json.dumps({"execution_id": UNKNOWN_ID, "provider": ["codex"]}).encode()
    send(server, request, [theirs.fileno()])
    theirs.close()
    ours.settimeout(PATIENCE_S)
    assert b'"pid"' in ours.recv(64)  # forked: a request is read for its execution id
    ours.close()
    a_valid_fork_fails_cleanly(server, tmp_path)


@pytest.mark.parametrize("mcp_config", [False, True], ids=["no-mcp", "mcp-config"])
def test_a_worker_task_names_its_executions_provider_to_the_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mcp_config: bool) -> None:
    """The task (:func:`~services.worker.handlers.handle_execute_node`) reads the execution and
    its slot's request names its provider, and MCP when the deployment configures MCP servers
    (``STUDIO_MCP_CONFIG``): the server then holds that provider's SDK, and the MCP client only
    then (a codex execution whose repository is unreachable: it ends failed, which does not
    matter here)."""
    values = {"DATABASE_URL": f"sqlite:///{tmp_path / 'studio.db'}",
              "DATA_DIR": str(tmp_path / "data"), "WORKSPACE_DIR": str(tmp_path / "ws"),
              "REPO_ALLOWED_HOSTS": "127.0.0.1", "SANDBOX": "none"}
    if mcp_config:
        (tmp_path / "mcp.json").write_text('{"servers": {}}')
        values["MCP_CONFIG"] = str(tmp_path / "mcp.json")
    for name, value in values.items():
        monkeypatch.setenv(f"STUDIO_{name}", value)
    monkeypatch.setenv("HOME", str(tmp_path))
    get_settings.cache_clear()
    settings = get_settings()
    db = open_database(settings)
    fresh = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"})
    use_fork_server(fresh)
    try:
        execution_id = create_execution(db, ExecutionRequest(
            provider="codex", prompt="p", repo_url="http://127.0.0.1:9/acme/gone",
            pull_request=False), Redactor(), settings=settings)
        decision = handle_execute_node(parse(ExecuteNodePayload, {"execution_id": execution_id}),
                                       settings)
        assert decision is Admission.RUN
        row = ExecutionRepository(db).get(execution_id)
        assert row is not None and row.finished_at is not None  # it ran, forked, and ended
        assert sdks_in(fresh.pid) == ({"codex", "mcp"} if mcp_config else {"codex"})
    finally:
        use_fork_server(None)
        fresh.stop()
        db.dispose()
        get_settings.cache_clear()


def test_a_server_started_with_provider_names_holds_their_sdks_when_ready(
        tmp_path: Path) -> None:
    """``ForkServer.start(providers=...)``: the named providers' SDKs are imported before the
    server says ready (and their first execution loads nothing more); a name no profile knows,
    replay (nothing to import) and a repeat are dropped."""
    fresh = ForkServer.start({"PATH": os.environ["PATH"], "LANG": "C.UTF-8"},
                             providers=["codex", "replay", "no-such", "../../os", "codex"])
    try:
        assert sdks_in(fresh.pid) == {"codex"}
        assert b"\0codex\0" in Path(f"/proc/{fresh.pid}/cmdline").read_bytes()
        a_valid_fork_fails_cleanly(fresh, tmp_path, provider="codex")
        assert sdks_in(fresh.pid) == {"codex"}
    finally:
        fresh.stop()


OPENAI_KEY = "sk-warmconfigured-0123456789abcdefABCDEF"
# the credential variables of every API key mode, and the settings that pick a mode
CREDENTIALS = ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY",
               "ANTHROPIC_AUTH_TOKEN", "STUDIO_CODEX_AUTH", "STUDIO_GEMINI_AUTH",
               "STUDIO_CLAUDE_AUTH")


@pytest.mark.parametrize("key", [True, False], ids=["openai-key", "no-key"])
def test_a_worker_fork_server_preloads_the_sdks_of_the_configured_providers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: bool) -> None:
    """A worker (:func:`~services.worker.runner.process_model`, what ``studio worker`` runs)
    whose environment holds ``OPENAI_API_KEY`` starts a fork server that holds the OpenAI SDK as
    soon as it is ready, and no other (witness: the server of before imports no SDK before a
    request names one). Control: with no key at all it holds none. Either way the key is
    nowhere in the server: not in its environment, its command line or its memory."""
    for name in CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    if key:
        monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", "   ")  # blank: not a credential
    monkeypatch.setenv("STUDIO_DATABASE_URL", f"sqlite:///{tmp_path / 'studio.db'}")
    monkeypatch.setenv("STUDIO_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path))
    get_settings.cache_clear()
    try:
        with process_model(get_settings()) as pool:
            assert pool == "threads"
            fresh = child._fork_server
            assert fresh is not None
            deadline = time.monotonic() + 180.0
            while not fresh.ready():
                assert fresh.alive() and time.monotonic() < deadline
                time.sleep(0.2)
            held = sdks_in(fresh.pid)
            secret = OPENAI_KEY.encode()
            assert secret not in Path(f"/proc/{fresh.pid}/environ").read_bytes()
            assert secret not in Path(f"/proc/{fresh.pid}/cmdline").read_bytes()
            assert secret not in writable_memory(fresh.pid)
    finally:
        get_settings.cache_clear()
    assert held == ({"codex"} if key else set())
