"""The disk cap of a workspace is enforced while the loop runs (through its run control)."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.execution.errors import ErrorCode, ToolFailure
from services.repos.workspaces import DiskGuard, Workspace, disk_room_check


class Flag:
    def __init__(self) -> None:
        self.code: ErrorCode | None = None

    def check(self) -> ErrorCode | None:
        return self.code


def _workspace(tmp_path: Path, cap: int) -> Workspace:
    repo = tmp_path / "exec" / "repo"
    repo.mkdir(parents=True)
    return Workspace(path=repo, base_branch="main", base_commit="0" * 40, branch="studio/x",
                     remote_url="https://example.invalid/r.git", execution_id="x",
                     disk_cap_bytes=cap)


def test_over_the_cap_stops_with_budget_exceeded(tmp_path: Path) -> None:
    now = [0.0]
    ws = _workspace(tmp_path, cap=10_000)
    guard = DiskGuard(Flag(), ws, interval_s=5.0, clock=lambda: now[0])
    assert guard.check() is None
    (ws.path / "big.bin").write_bytes(b"x" * 20_000)
    assert guard.check() is None  # measured at most every interval
    now[0] = 6.0
    assert guard.check() is ErrorCode.BUDGET_EXCEEDED


def test_the_inner_control_answers_first(tmp_path: Path) -> None:
    inner = Flag()
    inner.code = ErrorCode.KILLSWITCH_ENGAGED
    guard = DiskGuard(inner, _workspace(tmp_path, cap=1))
    assert guard.check() is ErrorCode.KILLSWITCH_ENGAGED


def test_a_large_write_is_checked_before_it_happens(tmp_path: Path) -> None:
    """A copy that would outgrow the cap is refused before one byte is written, not noticed by
    the guard seconds later (a sparse file copied out once filled the disk that way)."""
    ws = _workspace(tmp_path, cap=3 * 1024 * 1024)
    (ws.path / "a.bin").write_bytes(b"x" * 1024 * 1024)
    check = disk_room_check(ws)
    check(100)  # small writes are the guard's business
    check(1024 * 1024)
    with pytest.raises(ToolFailure) as refused:
        check(5 * 1024 * 1024)
    assert refused.value.code is ErrorCode.BUDGET_EXCEEDED
