"""The retry backoff (``services.runs.retries.Backoff``) and the journal rule that makes a
retried loop run again (``services.runs.results.recorded_run``)."""

from __future__ import annotations

import random
from typing import Any

from services.runs.results import recorded_run
from services.runs.retries import Backoff, retryable

DEFAULTS = Backoff()


def test_the_defaults_are_the_issues() -> None:
    assert (DEFAULTS.base_s, DEFAULTS.factor, DEFAULTS.max_delay_s, DEFAULTS.max_attempts) == (
        30.0, 2.0, 900.0, 5)


def test_each_wait_is_at_least_the_one_before_and_jittered_within_its_bounds() -> None:
    for seed in range(200):
        rng = random.Random(seed)
        waits = [DEFAULTS.delay(n, rng=rng) for n in range(1, 8)]
        assert waits == sorted(waits), (seed, waits)
        for n, wait in enumerate(waits, start=1):
            ceiling = min(900.0, 30.0 * 2 ** (n - 1))
            assert ceiling / 2 <= wait <= ceiling
        assert waits[-1] == 900.0  # at the cap
    # jitter: not the same wait every time
    assert len({round(DEFAULTS.delay(1, rng=random.Random(s)), 6) for s in range(20)}) > 10


def test_retry_after_is_honoured_up_to_the_cap() -> None:
    rng = random.Random(1)
    assert DEFAULTS.delay(1, retry_after=120.0, rng=rng) == 120.0
    assert DEFAULTS.delay(1, retry_after=10_000.0, rng=rng) == 900.0
    assert 15.0 <= DEFAULTS.delay(1, retry_after=1.0, rng=rng) <= 30.0  # shorter: the backoff


def test_only_failures_with_an_infrastructure_code_are_retried() -> None:
    assert retryable({"status": "failed", "error_code": "provider_unavailable"})
    assert retryable({"status": "failed", "error_code": "mcp_server_crashed"})
    assert not retryable({"status": "failed", "error_code": "provider_rejected"})
    assert not retryable({"status": "failed", "error_code": "path_outside_workspace"})
    assert not retryable({"status": "failed", "error_code": "spend_cap_reached"})
    assert not retryable({"status": "stalled", "error_code": "provider_unavailable"})
    assert not retryable({"status": "failed", "error_code": None})


def _finished(outcome: str) -> tuple[str, dict[str, Any]]:
    return ("finished", {"outcome": outcome, "result": {"status": "failed", "summary": "x"},
                         "error": {"code": "provider_unavailable", "message": "503"}})


def test_a_failed_loop_followed_by_a_retry_runs_again() -> None:
    started = ("started", {"task": "t"})
    failed = [started, _finished("error")]
    assert recorded_run("e", "codex", "m", failed) is not None  # the witness reads an ending
    assert recorded_run("e", "codex", "m", [*failed, ("retry", {"status": "queued"})]) is None


def test_a_loop_that_finished_before_a_failed_finalization_is_not_run_again() -> None:
    done = [("started", {"task": "t"}), _finished("finished"),
            ("finalize", {"step": "push", "ok": False}), ("retry", {"status": "queued"})]
    run = recorded_run("e", "codex", "m", done)
    assert run is not None and run.outcome.value == "finished"


def test_studio_logs_says_what_each_retry_event_did() -> None:
    from services.cli.journal_text import event_lines

    queued = {"status": "queued", "attempts": 1, "retry_at": "2026-11-28T16:00:00+00:00",
              "error": {"code": "provider_unavailable", "message": "HTTP 503"}}
    assert event_lines("retry", 0, queued) == [
        "[  0] attempt 1 failed (provider_unavailable: HTTP 503): retried at "
        "2026-11-28T16:00:00+00:00"]
    dead = {**queued, "status": "dead_lettered", "attempts": 5}
    assert "dead-lettered" in event_lines("retry", 0, dead)[0]
    assert event_lines("retry", 0, {"redriven_by": "ops"}) == [
        "[  0] re-driven from the dead-letter queue by ops"]
