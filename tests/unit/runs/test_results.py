"""How every execution ends, in place or cloned: the cutover refusal and the columns written."""

from __future__ import annotations

from typing import Any

from services.db.redaction import Redactor
from services.db.status import ExecutionStatus
from services.execution.errors import ErrorCode
from services.execution.outcomes import Outcome
from services.runs.results import cutover_refusal, end_fields, failed_run


def _snapshot(enabled: bool) -> dict[str, Any]:
    return {"agent_runtime_cutover_enabled": {"value": enabled, "source": "runtime_setting"}}


def test_cutover_off_is_refused_only_for_a_provider_without_a_legacy_cli() -> None:
    assert cutover_refusal(_snapshot(True), "replay") is None
    assert cutover_refusal(_snapshot(False), "claude") is None  # the legacy runtime runs it
    refusal = cutover_refusal(_snapshot(False), "replay")
    assert refusal is not None and refusal.code is ErrorCode.UNSUPPORTED_CAPABILITY
    assert "no agent CLI" in refusal.message


def test_a_failed_run_ends_failed_with_its_code_and_no_secret() -> None:
    run = failed_run("e1", "replay", "m", ErrorCode.CONFIG_ERROR, "bad token s3cr3t-value")
    assert run.outcome is Outcome.ERROR and not run.succeeded
    fields = end_fields(run, Redactor(["s3cr3t-value"]))
    assert fields["status"] == ExecutionStatus.FAILED
    assert fields["error_code"] == "config_error"
    assert "s3cr3t-value" not in fields["error_message"]
    assert "s3cr3t-value" not in str(fields["result"])
    assert fields["iterations"] == 0 and fields["cost_usd"] == 0.0
