"""The disk cap of a workspace is enforced while the loop runs (through its run control)."""

from __future__ import annotations

from pathlib import Path

from services.execution.errors import ErrorCode
from services.workspaces import DiskGuard, Workspace


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
