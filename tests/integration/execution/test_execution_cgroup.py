"""Issue 12d: without a long-lived sandbox (``none``), one cgroup serves a whole execution.

Each command joins the execution's group instead of getting one made (and its limits written)
for it alone. What must not change: the limits hold for each command, nothing a command starts
outlives it (the group is emptied when the command ends), and the group is gone when the
execution ends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.execution.sandbox.cgroup import CommandGroup, ExecutionGroup, cgroup_layout
from services.execution.tool_domains.context import ToolDomainContext
from tests.conftest import IN_CI
from tests.integration.execution.test_sandbox_limits import FORKS, HOG, SMALL
from tests.unit.execution.command_helpers import (
    gone,
    marker_pids,
    run_command,
    sandbox_context,
    sleep_marker,
)

pytestmark = pytest.mark.sandbox


def _needs_cgroup() -> None:
    if cgroup_layout() is None:
        if IN_CI:
            pytest.fail("no cgroup here")
        pytest.skip("a non-root harness gets rlimits only")


@pytest.fixture
def ctx(workspace: Path) -> Iterator[ToolDomainContext]:
    with sandbox_context(workspace, "none-session", SMALL) as found:
        yield found


def _run(ctx: ToolDomainContext, timeout_s: float = 120, **args: Any) -> dict[str, Any]:
    envelope = run_command(ctx, timeout_s=timeout_s, **args)
    assert envelope["ok"] is True, envelope
    result: dict[str, Any] = envelope["result"]
    return result


def _group_of(ctx: ToolDomainContext) -> ExecutionGroup:
    group = getattr(ctx.sandbox, "group", None)
    assert isinstance(group, ExecutionGroup)
    return group


def test_commands_share_the_executions_group(ctx: ToolDomainContext) -> None:
    _needs_cgroup()
    own = [_run(ctx, command="cat /proc/self/cgroup")["stdout"] for _ in range(3)]
    assert own[0] == own[1] == own[2]
    group = _group_of(ctx).group()
    assert isinstance(group, CommandGroup)
    assert all(d.name in own[0] for d in group.dirs), own[0]


def test_the_group_is_removed_with_the_execution(workspace: Path) -> None:
    _needs_cgroup()
    with sandbox_context(workspace, "none-session", SMALL) as ctx:
        _run(ctx, command="true")
        group = _group_of(ctx).group()
        assert group is not None and all(d.is_dir() for d in group.dirs)
    assert not any(d.exists() for d in group.dirs)


def test_a_background_process_is_gone_before_the_next_command(ctx: ToolDomainContext) -> None:
    marker = sleep_marker()
    first = _run(ctx, command=f"setsid sh -c 'sleep {marker}' > /dev/null 2>&1 < /dev/null &")
    assert first["exit_code"] == 0, first
    assert not marker_pids(marker), "the background sleep outlived its command"
    second = _run(ctx, command=f"ps -eo args | grep -c '^sleep {marker}' || true")
    assert second["stdout"].strip() == "0", second
    assert gone(marker)


def test_the_limits_hold_for_each_command(ctx: ToolDomainContext) -> None:
    _needs_cgroup()
    for _ in range(2):  # the second command in the same group is held as the first
        hog = _run(ctx, argv=["python3", "-c", HOG])
        assert "ALLOCATED" not in hog["stdout"], hog
        bomb = _run(ctx, timeout_s=60, argv=["python3", "-c", FORKS])
        started = [int(w) for w in bomb["stdout"].split() if w.isdigit()]
        assert started and started[0] < SMALL.processes, bomb
    assert _run(ctx, command="echo still-fine")["stdout"] == "still-fine\n"
    group = _group_of(ctx).group()
    assert group is not None
    assert all(not (d / "cgroup.procs").read_text().split() for d in group.dirs)
