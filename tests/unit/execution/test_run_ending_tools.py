"""A tool handler's :class:`RunEndingError` (an MCP server that crashed a second time) is the
run's error, not the call's: the dispatcher lets it through; any other exception of a handler is
still the call's ``internal_error`` result."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.execution.envelope import ErrorEnvelope
from services.execution.errors import ErrorCode, RunEndingError
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher, ToolRegistry
from services.execution.tool_domains.spec import ToolArgs, ToolSpec


def _dispatch(tmp_path: Path, error: Exception) -> Any:
    def handler(_args: ToolArgs, _ctx: ToolDomainContext) -> dict[str, Any]:
        raise error

    registry = ToolRegistry([ToolSpec(domain="demo", operation="boom", description="fails",
                                      args_model=ToolArgs, handler=handler)])
    dispatcher = Dispatcher(registry)
    ctx = ToolDomainContext(workspace_root=tmp_path, execution_id="e", request_id="r",
                            correlation_id="c")
    return dispatcher.dispatch(dispatcher.normalize("call-1", "demo_boom", {}), ctx)


def test_a_run_ending_error_ends_the_run(tmp_path: Path) -> None:
    with pytest.raises(RunEndingError) as ended:
        _dispatch(tmp_path, RunEndingError("crashed twice", code=ErrorCode.MCP_SERVER_CRASHED))
    assert ended.value.code is ErrorCode.MCP_SERVER_CRASHED


def test_any_other_handler_error_is_the_calls_result(tmp_path: Path) -> None:
    envelope = _dispatch(tmp_path, RuntimeError("a bug"))
    assert isinstance(envelope, ErrorEnvelope)
    assert envelope.error.code is ErrorCode.INTERNAL_ERROR
