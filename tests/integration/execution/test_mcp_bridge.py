"""MCP servers (stdio and streamable HTTP) as tools, called through the one dispatcher."""
# ruff: noqa: F811  (the fixtures are imported from mcp_fixtures, then named as arguments)

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from services.execution.envelope import (
    ErrorEnvelope,
    SuccessEnvelope,
    envelope_from_json,
    envelope_to_json,
)
from services.execution.errors import (
    ConfigError,
    ErrorCode,
    ErrorKind,
    RunEndingError,
    ToolFailure,
    error_kind,
)
from services.execution.mcp.bridge import TOOL_NAME_PATTERN, McpHub, mcp_tool_name
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from tests.integration.mcp_fixtures import (
    DEMO_FLAG,
    expected_tool_names,
    stdio_server_entry,
    write_mcp_config,
)
from tests.support.mcp_servers import LONG_TOOL_NAME

BROKEN_SERVER = {"transport": "stdio", "command": sys.executable,
                 "args": ["-c", "import sys; print('cannot start: no license', file=sys.stderr); "
                                "sys.exit(3)"]}


def _ctx(tmp_path: Path, **overrides: Any) -> ToolDomainContext:
    return ToolDomainContext(workspace_root=tmp_path, execution_id="exec-mcp",
                             request_id="req-1", correlation_id="corr-1", **overrides)


def _dispatch(hub: McpHub, ctx: ToolDomainContext, name: str, args: dict[str, Any],
              call_id: str = "call-1") -> SuccessEnvelope | ErrorEnvelope:
    registry = ToolRegistry()
    hub.register(registry)
    dispatcher = Dispatcher(registry)
    return dispatcher.dispatch(dispatcher.normalize(call_id, name, args), ctx)


def _stdio_children() -> list[int]:
    """Our child processes that run the demo stdio server."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        if ppid == os.getpid() and b"stdio" in cmdline and b"mcp_servers.py" in b" ".join(cmdline):
            pids.append(int(entry.name))
    return pids


def test_tools_are_listed_with_provider_names_and_the_servers_schemas(mcp_hub: McpHub) -> None:
    specs = {spec.name: spec for spec in mcp_hub.specs()}
    assert set(specs) == expected_tool_names()
    for spec in specs.values():
        assert spec.domain == "mcp"
        assert TOOL_NAME_PATTERN.match(spec.name)
    add = specs["mcp__remote__add"].describe()
    assert add["parameters"]["type"] == "object"
    assert add["parameters"]["properties"]["a"]["type"] == "integer"
    assert sorted(add["parameters"]["required"]) == ["a", "b"]
    assert "Add two integers." in add["description"]
    assert specs["mcp__local__echo"].mutates is False  # declared read-only by the server
    assert specs["mcp__local__fail"].mutates is True  # no hint: assume it changes things


def test_a_tool_whose_full_name_would_not_fit_is_skipped(mcp_hub: McpHub) -> None:
    too_long = mcp_tool_name("local", LONG_TOOL_NAME)
    assert too_long in mcp_hub.skipped
    assert too_long not in {spec.name for spec in mcp_hub.specs()}


@pytest.mark.parametrize("server", ["local", "remote"])
def test_calls_through_the_dispatcher_answer_success_envelopes(
        mcp_hub: McpHub, tmp_path: Path, server: str) -> None:
    envelope = _dispatch(mcp_hub, _ctx(tmp_path), f"mcp__{server}__add", {"a": 2, "b": 40})
    assert isinstance(envelope, SuccessEnvelope), envelope
    assert (envelope.tool_name, envelope.domain) == (f"mcp__{server}__add", "mcp")
    assert envelope.result["content"] == [{"type": "text", "text": "42"}]
    assert envelope.result["structured"] == {"result": 42}
    assert envelope.result["is_error"] is False
    assert envelope.correlation_id == "corr-1"
    assert envelope_from_json(envelope_to_json(envelope)) == envelope


def test_a_call_id_seen_before_answers_the_recorded_envelope(
        mcp_hub: McpHub, tmp_path: Path) -> None:
    registry = ToolRegistry()
    mcp_hub.register(registry)
    dispatcher = Dispatcher(registry)
    ctx = _ctx(tmp_path)
    first = dispatcher.dispatch(dispatcher.normalize("c-7", "mcp__local__echo", {"text": "a"}), ctx)
    again = dispatcher.dispatch(dispatcher.normalize("c-7", "mcp__local__echo", {"text": "b"}), ctx)
    assert isinstance(first, SuccessEnvelope)
    assert again == first


@pytest.mark.parametrize("server", ["local", "remote"])
def test_an_mcp_error_result_is_an_error_envelope(
        mcp_hub: McpHub, tmp_path: Path, server: str) -> None:
    envelope = _dispatch(mcp_hub, _ctx(tmp_path), f"mcp__{server}__fail", {"reason": "disk full"})
    assert isinstance(envelope, ErrorEnvelope), envelope
    assert envelope.domain == "mcp"
    assert envelope.error.code == ErrorCode.MCP_TOOL_ERROR
    assert "disk full" in envelope.error.message
    assert envelope.error.retryable is False
    assert envelope.error.details["server"] == server


def test_long_text_is_capped_to_the_context_output_cap(mcp_hub: McpHub, tmp_path: Path) -> None:
    envelope = _dispatch(mcp_hub, _ctx(tmp_path, output_cap_bytes=200), "mcp__local__echo",
                         {"text": "x" * 5000})
    assert isinstance(envelope, SuccessEnvelope)
    assert envelope.result["truncated"] is True
    assert len(envelope.result["content"][0]["text"]) < 400
    assert envelope.result["structured"] is None


def test_a_server_that_fails_to_start_is_reported_and_the_others_still_work(
        tmp_path: Path) -> None:
    config = write_mcp_config(tmp_path / "mcp.json", {
        "local": stdio_server_entry(),
        "broken": BROKEN_SERVER,
        "missing": {"transport": "stdio", "command": str(tmp_path / "no-such-server")},
    })
    with McpHub.from_file(config) as hub:
        assert set(hub.failures) == {"broken", "missing"}
        broken = hub.failures["broken"]
        assert isinstance(broken, ConfigError)
        assert broken.code == ErrorCode.CONFIG_ERROR
        assert "'broken'" in broken.message
        assert "no license" in broken.details["stderr_tail"]
        assert "FileNotFoundError" in hub.failures["missing"].message
        assert {spec.name for spec in hub.specs()} == expected_tool_names(("local",))
        envelope = _dispatch(hub, _ctx(tmp_path), "mcp__local__echo", {"text": "still here"})
        assert isinstance(envelope, SuccessEnvelope)
        assert envelope.result["content"][0]["text"] == "still here"
        with pytest.raises(ToolFailure) as failure:
            hub.call_tool("broken", "echo", {"text": "x"})
        assert failure.value.code == ErrorCode.INTEGRATION_UNAVAILABLE
        assert failure.value.retryable is True


def test_strict_start_raises_a_config_error_and_leaves_no_child(tmp_path: Path) -> None:
    config = write_mcp_config(tmp_path / "mcp.json", {
        "local": stdio_server_entry(), "broken": BROKEN_SERVER})
    hub = McpHub.from_file(config)
    with pytest.raises(ConfigError, match="'broken'"):
        hub.start(strict=True)
    assert _stdio_children() == []


def test_an_unreachable_http_server_is_a_start_failure(tmp_path: Path) -> None:
    config = write_mcp_config(tmp_path / "mcp.json", {
        "gone": {"transport": "http", "url": "http://127.0.0.1:9/mcp"}})
    with McpHub.from_file(config) as hub:
        assert "ConnectError" in hub.failures["gone"].message
        assert hub.specs() == []


def test_the_stdio_server_does_not_see_the_parents_secrets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_TEST_SECRET_TOKEN", "s3cr3t-value")
    config = write_mcp_config(tmp_path / "mcp.json", {"local": stdio_server_entry()})
    with McpHub.from_file(config, base_env={"LANG": "C.UTF-8"}) as hub:
        names = set(hub.call_tool("local", "env_names", {})["structured"]["result"])
    assert "STUDIO_TEST_SECRET_TOKEN" not in names
    assert {DEMO_FLAG[0], "LANG", "PATH"} <= names
    # the mcp library's fixed list, ours, the config's, and what Python sets itself
    allowed = {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", DEMO_FLAG[0],
               "LC_CTYPE"}
    assert names <= allowed


def test_close_ends_the_stdio_server_and_later_calls_are_unavailable(
        mcp_hub: McpHub, tmp_path: Path) -> None:
    pid = mcp_hub.call_tool("local", "pid", {})["structured"]["result"]
    assert pid in _stdio_children()
    mcp_hub.close()
    assert _stdio_children() == []
    assert not Path(f"/proc/{pid}").exists()
    with pytest.raises(ToolFailure) as failure:
        mcp_hub.call_tool("local", "echo", {"text": "x"})
    assert failure.value.code == ErrorCode.INTEGRATION_UNAVAILABLE
    mcp_hub.close()  # twice is harmless


def test_a_slow_tool_times_out_as_retryable_and_the_server_stays_usable(tmp_path: Path) -> None:
    config = write_mcp_config(tmp_path / "mcp.json", {"local": stdio_server_entry(timeout_s=0.5)})
    with McpHub.from_file(config) as hub:
        envelope = _dispatch(hub, _ctx(tmp_path), "mcp__local__sleep", {"seconds": 30})
        assert isinstance(envelope, ErrorEnvelope)
        assert envelope.error.code == ErrorCode.INTEGRATION_UNAVAILABLE
        assert envelope.error.retryable is True
        assert envelope.error.details["timed_out"] is True
        assert hub.call_tool("local", "echo", {"text": "ok"})["content"][0]["text"] == "ok"


def test_a_stdio_server_that_dies_is_restarted_once_then_its_crash_ends_the_run(
        mcp_hub: McpHub, tmp_path: Path) -> None:
    """F5: the first crash restarts the server (the model gets ``mcp_server_crashed``, a
    structured, retryable error, and the next call reaches the new process); the second is the
    run's error, ``mcp_server_crashed`` (an infrastructure code: the execution is retried)."""
    pid = mcp_hub.call_tool("local", "pid", {})["structured"]["result"]
    os.kill(pid, signal.SIGKILL)
    envelope = _dispatch(mcp_hub, _ctx(tmp_path), "mcp__local__echo", {"text": "x"})
    assert isinstance(envelope, ErrorEnvelope)
    assert envelope.error.code == ErrorCode.MCP_SERVER_CRASHED
    assert envelope.error.retryable is True and envelope.error.details["restarted"] is True
    again = mcp_hub.call_tool("local", "pid", {})["structured"]["result"]
    assert again != pid and again in _stdio_children() and pid not in _stdio_children()
    remote = _dispatch(mcp_hub, _ctx(tmp_path), "mcp__remote__echo", {"text": "y"}, "call-2")
    assert isinstance(remote, SuccessEnvelope)
    os.kill(again, signal.SIGKILL)
    with pytest.raises(RunEndingError) as ended:
        _dispatch(mcp_hub, _ctx(tmp_path), "mcp__local__echo", {"text": "x"}, "call-3")
    assert ended.value.code == ErrorCode.MCP_SERVER_CRASHED
    assert error_kind(ended.value.code) is ErrorKind.INFRASTRUCTURE
    assert mcp_hub.restarted == {"local"}


def test_an_http_server_that_goes_away_is_unavailable(tmp_path: Path) -> None:
    from tests.support.mcp_servers import running_http_server

    with running_http_server() as url:
        config = write_mcp_config(tmp_path / "mcp.json",
                                  {"remote": {"transport": "http", "url": url}})
        hub = McpHub.from_file(config)
        hub.start(strict=True)
    try:
        envelope = _dispatch(hub, _ctx(tmp_path), "mcp__remote__echo", {"text": "x"})
        assert isinstance(envelope, ErrorEnvelope)
        assert envelope.error.code == ErrorCode.INTEGRATION_UNAVAILABLE
        assert envelope.error.retryable is True
    finally:
        hub.close()
