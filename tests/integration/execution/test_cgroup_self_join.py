"""On cgroup v1 a command's gate moves itself into its group (``0`` written to ``tasks``)
instead of the harness writing its pid to ``cgroup.procs`` (a write that waits for an RCU grace
period): the command still runs in the group, and a gate that cannot join runs nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.execution.ports import PreparedCommand
from services.execution.sandbox.cgroup import (
    GATE_SCRIPT,
    SELF_JOIN_GATE_SCRIPT,
    CommandGroup,
    ExecutionGroup,
    cgroup_layout,
    with_limits,
)
from services.execution.sandbox.limits import CommandLimits
from services.execution.tool_domains.command.process import run_prepared
from tests.conftest import IN_CI

pytestmark = pytest.mark.sandbox
LIMITS = CommandLimits()


def _group() -> tuple[ExecutionGroup, CommandGroup]:
    if cgroup_layout() is None:
        if IN_CI:
            pytest.fail("no cgroup here")
        pytest.skip("a non-root harness gets rlimits only")
    shared = ExecutionGroup(LIMITS)
    group = shared.group()
    assert group is not None
    return shared, group


def _prepared(workspace: Path, argv: list[str], shared: ExecutionGroup) -> PreparedCommand:
    return with_limits(PreparedCommand(argv=argv, env={"PATH": "/usr/bin:/bin"}, cwd=workspace),
                       LIMITS, shared=shared)


def test_the_command_runs_in_its_group(workspace: Path) -> None:
    shared, group = _group()
    try:
        prepared = _prepared(workspace, ["cat", "/proc/self/cgroup"], shared)
        script = prepared.argv[2]
        if group.layout.version == 1:
            assert script == SELF_JOIN_GATE_SCRIPT
            assert [str(p) for p in group.self_join_files()] == prepared.argv[4:4 + len(
                group.dirs)]
        else:
            assert script == GATE_SCRIPT and group.self_join_files() == []
        outcome = run_prepared(prepared, timeout_s=60, cap=10_000)
        assert outcome.exit_code == 0, outcome
        own = bytes(outcome.stdout.head + outcome.stdout.tail).decode()
        assert all(d.name in own for d in group.dirs), own
    finally:
        shared.close()


def test_a_gate_that_cannot_join_runs_nothing(workspace: Path) -> None:
    shared, group = _group()
    if group.layout.version != 1:  # v2: the harness places the child (the test above)
        assert group.self_join_files() == []
        shared.close()
        return
    try:
        group.remove()  # gone before the command starts: its tasks files with it
        marker = workspace / "ran"
        try:
            outcome = run_prepared(_prepared(workspace, ["touch", str(marker)], shared),
                                   timeout_s=60, cap=10_000)
        except ToolFailure as failure:  # the gate exited before the harness set its rlimits
            assert failure.code is ErrorCode.SANDBOX_UNAVAILABLE
        else:
            assert outcome.exit_code == 125, outcome
            stderr = bytes(outcome.stderr.head + outcome.stderr.tail)
            assert b"could not join its cgroup" in stderr
        assert not marker.exists()
    finally:
        shared.close()
