"""What a run claims to have changed: the evidence finalization holds against an empty branch."""

from __future__ import annotations

from typing import Any

from services.execution.messages import AgentResult
from services.runs.claimed_changes import claimed_changes


def _result(domain: str, operation: str, ok: bool = True) -> tuple[str, dict[str, Any]]:
    return "tool_result", {"call": {"domain": domain, "operation": operation},
                           "envelope": {"ok": ok}}


def test_listed_changes_and_successful_edits_are_claims() -> None:
    events = [_result("workspace", "edit_file"), _result("workspace", "write_file"),
              _result("git", "commit"), ("tool_call", {"call": {}})]
    assert claimed_changes(AgentResult(changes=["calc.py"]), events) == (
        "the result lists 1 change(s)",
        "the journal records 3 successful edit(s) (git.commit, workspace.edit_file, "
        "workspace.write_file)")


def test_reads_failures_commands_and_pushes_claim_nothing() -> None:
    events = [_result("workspace", "read_file"), _result("workspace", "edit_file", ok=False),
              _result("command", "run"), _result("git", "push"), _result("git", "status")]
    assert claimed_changes(AgentResult(), events) == ()
