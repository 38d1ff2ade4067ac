"""``STUDIO_EXECUTION_MCP``: the MCP servers a worker hands an executor pod with its own
database login (``services.runs.agent_setup.handed_mcp``). The pod takes only the servers its
agent names, refuses a name it was not handed with ``unknown_mcp_server``, and a value that is
not the configuration with ``config_error``, never echoing the (secret) value."""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from services.execution.errors import ConfigError, ErrorCode
from services.runs.agent_setup import handed_mcp

HANDED = {"servers": {
    "docs": {"transport": "http", "url": "https://mcp.example.com/mcp",
             "headers": {"Authorization": "Bearer docs-secret"}},
    "extra": {"transport": "http", "url": "https://extra.example.com/mcp",
              "headers": {"Authorization": "Bearer extra-secret"}}}}


def test_only_the_named_servers_are_taken() -> None:
    config = handed_mcp(SecretStr(json.dumps(HANDED)), ["docs"])
    assert list(config.servers) == ["docs"]


def test_a_name_not_handed_is_an_unknown_server() -> None:
    with pytest.raises(ConfigError) as refused:
        handed_mcp(SecretStr(json.dumps(HANDED)), ["docs", "missing"])
    assert refused.value.code == ErrorCode.UNKNOWN_MCP_SERVER
    assert refused.value.details == {"name": "missing"}


@pytest.mark.parametrize("value", ["not json {Bearer docs-secret", "[]",
                                   '{"servers": {"x": {"transport": "smoke"}}}',
                                   '{"servers": {}, "extra": "Bearer docs-secret"}'])
def test_a_value_that_is_not_the_configuration_is_refused_without_echo(value: str) -> None:
    with pytest.raises(ConfigError) as refused:
        handed_mcp(SecretStr(value), ["x"])
    assert refused.value.code == ErrorCode.CONFIG_ERROR
    assert "docs-secret" not in str(refused.value) + json.dumps(refused.value.details)
