"""The MCP config file (accepted, refused, secrets kept out of errors) and result conversion."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from services.execution.errors import ConfigError, ErrorCode
from services.execution.mcp.config import (
    HttpServerConfig,
    StdioServerConfig,
    load_mcp_config,
    parse_mcp_config,
)
from services.execution.mcp.results import cap_text, error_text, result_json

GOOD: dict[str, Any] = {"servers": {
    "files": {"transport": "stdio", "command": "npx", "args": ["-y", "srv"],
              "env": {"API_TOKEN": "tok-123"}},
    "Web-2": {"transport": "http", "url": "http://127.0.0.1:8931/mcp",
              "headers": {"Authorization": "Bearer hdr-456"}, "timeout_s": 5},
}}


def test_a_valid_config_parses_both_transports() -> None:
    config = parse_mcp_config(GOOD)
    files, web = config.servers["files"], config.servers["Web-2"]
    assert isinstance(files, StdioServerConfig) and files.args == ["-y", "srv"]
    assert isinstance(web, HttpServerConfig) and web.timeout_s == 5
    assert files.cwd is None
    assert "tok-123" not in repr(config) and "hdr-456" not in repr(config)


def test_an_empty_file_means_no_servers(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text("{}")
    assert load_mcp_config(path).servers == {}


@pytest.mark.parametrize("servers", [
    {"has_underscore": {"transport": "stdio", "command": "x"}},
    {"a" * 21: {"transport": "stdio", "command": "x"}},
    {"": {"transport": "stdio", "command": "x"}},
    {"ok": {"transport": "sse", "url": "http://x"}},
    {"ok": {"transport": "stdio"}},
    {"ok": {"transport": "stdio", "command": ""}},
    {"ok": {"transport": "http", "url": "file:///etc/passwd"}},
    {"ok": {"transport": "http", "url": "http://x", "timeout_s": 0}},
    {"ok": {"transport": "stdio", "command": "x", "unknown": 1}},
])
def test_invalid_servers_are_config_errors(servers: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as error:
        parse_mcp_config({"servers": servers})
    assert error.value.code == ErrorCode.CONFIG_ERROR
    assert error.value.details["errors"]


def test_a_validation_error_never_echoes_a_secret_value() -> None:
    bad = {"servers": {"x": {"transport": "http", "url": "http://x",
                             "headers": {"Authorization": 12345}}}}
    with pytest.raises(ConfigError) as error:
        parse_mcp_config(bad)
    assert "12345" not in str(error.value) and "12345" not in repr(error.value.details)


def test_missing_and_malformed_files_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_mcp_config(tmp_path / "absent.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"servers": ')
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_mcp_config(broken)


def test_long_text_keeps_head_and_tail() -> None:
    text, cut = cap_text("A" * 100 + "B" * 100, 20)
    assert cut and text.startswith("A" * 10) and text.endswith("B" * 10) and "elided" in text
    assert cap_text("short", 20) == ("short", False)


def test_binary_blocks_are_described_not_inlined() -> None:
    data = base64.b64encode(b"\x89PNG" * 30).decode()
    result = types.CallToolResult(content=[
        types.ImageContent(data=data, mime_type="image/png"),
        types.TextContent(text="caption"),
    ])
    payload = result_json(result, 1000)
    assert payload["content"][0] == {"type": "image", "mime_type": "image/png", "size_bytes": 120}
    assert payload["content"][1] == {"type": "text", "text": "caption"}
    assert "truncated" not in payload


def test_error_text_joins_the_text_blocks() -> None:
    result = types.CallToolResult(content=[types.TextContent(text="bad input")], is_error=True)
    assert error_text(result) == "bad input"
    assert error_text(types.CallToolResult(content=[], is_error=True))
