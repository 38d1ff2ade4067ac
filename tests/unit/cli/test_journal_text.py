"""The journal as text (``studio executions logs``): outputs of failed commands, errors,
finalization and the end line."""

from __future__ import annotations

from services.cli.journal_text import end_lines, event_lines, tail


def test_a_failing_command_shows_failed_with_its_output_tails() -> None:
    envelope = {"ok": True, "result": {"exit_code": 1, "stdout": "a\nb\n", "stderr": "boom\n"}}
    assert event_lines("tool_result", 2, {"envelope": envelope}) == [
        "    <- exit 1 FAILED", "      stdout | a", "      stdout | b", "      stderr | boom"]
    error = {"ok": False, "error": {"code": "path_not_found", "message": "no x"}}
    assert event_lines("tool_result", 2, {"envelope": error}) == [
        "    <- error path_not_found: no x"]


def test_finalization_and_the_end() -> None:
    assert event_lines("finalize", 0, {"step": "push", "ok": True, "pushed": True,
                                       "branch": "studio/x"}) == [
        "[  0] finalize push: pushed studio/x"]
    failed = {"step": "pull_request", "ok": False,
              "error": {"code": "integration_unavailable", "message": "502"}}
    assert event_lines("finalize", 0, failed) == [
        "[  0] finalize pull_request: FAILED integration_unavailable: 502"]
    end = {"status": "failed", "branch": "studio/x", "head_sha": None, "pr_url": None,
           "usage": {"input_tokens": 5, "output_tokens": 1}, "cost_usd": 0.5,
           "error_code": "git_error", "error_message": "no base"}
    assert end_lines(end) == ["end: failed branch=studio/x tokens=5/1 cost=$0.5000",
                              "     error git_error: no base"]


def test_tail_keeps_the_last_lines() -> None:
    assert tail("\n".join(str(i) for i in range(50)), 3) == ["47", "48", "49"]
    assert tail("") == [] and tail("   \n") == []
