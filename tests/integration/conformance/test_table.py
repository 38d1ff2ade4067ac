"""The provider conformance table: every row x codex, codex-chat, gemini, claude, replay.

Collected only inside the loopback-only network namespace (see ``conftest.py``). Each run goes
through the real SDK (and, for claude, the Claude Code CLI bundled in ``claude-agent-sdk``)
against the scripted model server, the real dispatcher with the MCP hub's tools, a git workspace
and the real command sandbox. Every recorded request is checked on the wire: valid tool names,
schemas each vendor accepts, the credential only in the auth header.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.mcp.bridge import McpHub
from services.execution.ports import CommandSandbox
from services.execution.pricing import PriceTable
from services.execution.providers.capabilities import CAPABILITIES
from services.execution.providers.claude_tools import allowed_tool_name
from tests.integration.conformance.harness import (
    API_KEY,
    PROVIDERS,
    VENDOR,
    NotRepresentable,
    Run,
    capabilities,
    replay_script,
    run_row,
)
from tests.integration.conformance.netns import outside_reachable
from tests.integration.conformance.scenarios import ROWS, Row
from tests.support.model_server import (
    assert_no_credential_outside_auth,
    assert_tool_names_valid,
    check_tool_schema,
)

CASES = [pytest.param(row, provider, id=f"{row.id}-{provider}")
         for row in ROWS for provider in PROVIDERS]


def test_only_loopback_is_reachable() -> None:
    assert not outside_reachable(("192.0.2.1", 80))
    assert not outside_reachable(("1.1.1.1", 443))


def assert_wire(run: Run) -> None:
    """What the server saw: valid tool names and schemas, the key only in the auth header."""
    assert run.server is not None and not run.server.unmatched
    vendor = VENDOR[run.provider]
    assert run.requests, "the provider never called the server"
    for record in run.requests:
        assert record.vendor == vendor
        assert_tool_names_valid(record)
        declared = run.server.declared_tools(record)
        assert declared, "no tools declared"
        for tool in declared:
            assert check_tool_schema(vendor, tool.schema) == [], tool.name
        assert_no_credential_outside_auth(record, API_KEY)
    names = {t.name for t in run.server.declared_tools(run.requests[0])}
    wanted = {"workspace_write_file", "command_run", "git_status", "mcp__local__echo",
              "mcp__remote__add"}
    if run.provider == "claude":  # Claude Code names them after our in-process server
        wanted = {allowed_tool_name(name) for name in wanted}
    assert wanted <= names


@pytest.mark.parametrize(("row", "provider"), CASES)
def test_conformance(row: Row, provider: str, tmp_path: Path, mcp_hub: McpHub,
                     sandbox: CommandSandbox) -> None:
    reason = row.not_applicable.get(provider)
    if reason is not None:
        # declared N/A: the published matrix agrees, and the row's script has no replay form
        assert capabilities(provider).wire is None
        with pytest.raises(NotRepresentable):
            replay_script(row.steps, "gpt-5.1", PriceTable())
        return
    run = run_row(provider, row.steps, tmp=tmp_path, hub=mcp_hub, sandbox=sandbox,
                  limits=row.limits, kill_after_tool_results=row.kill_after_tool_results)
    assert run.result.outcome is row.expect, run.result.error
    if run.server is not None:
        assert_wire(run)
    row.check(run)


def test_every_provider_of_the_matrix_is_in_the_table() -> None:
    assert {capabilities(p).provider for p in PROVIDERS} == set(CAPABILITIES)
