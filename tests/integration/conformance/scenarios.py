"""The conformance table: vendor-neutral rows, each run unchanged against every provider.

A row is the fake model's script (``tests.support.model_script`` steps with neutral tool names),
the limits, the expected outcome and the row's own assertions. Where a row cannot hold as such
for a provider, the row's check says so explicitly, reading the published capability matrix
(``services.execution.providers.capabilities``), and asserts the documented behaviour instead;
``not_applicable`` names the providers a row cannot run on at all, with the reason.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from services.execution.guards import AgentLimits
from services.execution.messages import ToolResultPart
from services.execution.messages import Usage as NeutralUsage
from services.execution.outcomes import Outcome
from services.execution.pricing import PriceTable
from tests.integration.conformance.harness import MODELS, Run, envelope_json
from tests.support.model_server import Step, Usage, error, text, tool_calls

DONE = json.dumps({"status": "success", "summary": "done", "changes": ["hello.txt"]})
NO_WIRE = "replay has no wire: no provider call, so no HTTP error to retry or refuse"
BUDGET_USD = 0.5
BUDGET_USAGE = Usage(input_tokens=100_000, output_tokens=0)
BUGGY = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\nassert add(2, 3) == 5, add(2, 3)\nprint('tests passed')\n"
SIGNATURE = b"gemini-thought-signature-1"  # rendered by the Gemini wire only
RUN_TESTS = ("command_run", {"argv": ["python3", "test_calc.py"]})


def _write(i: int, **kw: Any) -> Step:
    return tool_calls([("workspace_write_file", {"path": f"f{i}.txt", "content": f"{i}\n"})],
                      **kw)


@dataclass(frozen=True)
class Row:
    id: str
    steps: tuple[Step, ...]
    expect: Outcome
    check: Callable[[Run], None]
    limits: AgentLimits = field(default_factory=AgentLimits)
    kill_after_tool_results: int | None = None
    not_applicable: Mapping[str, str] = field(default_factory=dict)


# --- shared assertions ---------------------------------------------------------------------


def results_sent_back(run: Run) -> None:
    """Every dispatched call went back to the model as a native tool result (wire providers)."""
    envelopes = run.envelopes()
    if run.server is None:  # replay: the neutral history holds them
        history = [p.envelope for m in run.result.messages for p in m.parts
                   if isinstance(p, ToolResultPart)]
        assert [e["call_id"] for e in history] == [e["call_id"] for e in envelopes]
        return
    last = run.requests[-1]
    returned = run.server.tool_results(last)
    assert len(returned) == len(envelopes), (returned, envelopes)
    kept = [c for turn in run.server.assistant_tool_turns(last) for c in turn.calls]
    assert len(kept) == len(envelopes)  # the model's own tool-call turns are kept
    for result, call, envelope in zip(returned, kept, envelopes, strict=True):
        if result.call_id is not None:
            assert result.call_id == call.call_id
        sent = envelope_json(result.content)
        assert sent["ok"] == envelope["ok"] and sent["call_id"] == envelope["call_id"]
        if not envelope["ok"]:
            assert sent["error"]["code"] == envelope["error"]["code"]
            if result.is_error is not None:  # anthropic says so on the block
                assert result.is_error is True


def error_codes(run: Run) -> list[str | None]:
    return [None if e["ok"] else e["error"]["code"] for e in run.envelopes()]


# --- rows ----------------------------------------------------------------------------------


def check_single(run: Run) -> None:
    assert (run.workspace / "hello.txt").read_text() == "hello\n"
    assert error_codes(run) == [None]
    assert run.result.status == "success" and run.result.parsed_result
    assert run.model_turns() == 2
    results_sent_back(run)
    if run.server is not None and run.caps.thought_signature:
        # gemini: the model's thought signature goes back byte for byte with its call
        [turn] = run.server.assistant_tool_turns(run.requests[1])
        assert turn.calls[0].thought_signature == base64.b64encode(SIGNATURE).decode()


def check_multi_step(run: Run) -> None:
    commands = [e["result"] for e in run.envelopes() if e["tool_name"] == "command_run"]
    assert [c["exit_code"] for c in commands] == [1, 0], commands
    assert "AssertionError" in commands[0]["stderr"] and "tests passed" in commands[1]["stdout"]
    assert (run.workspace / "calc.py").read_text() == BUGGY.replace("a - b", "a + b")
    assert error_codes(run) == [None] * 5
    assert run.model_turns() == 5
    results_sent_back(run)
    if run.server is not None:  # the failing run's output reached the model
        failing = run.server.tool_results(run.requests[2])[-1]
        assert envelope_json(failing.content)["result"]["exit_code"] == 1


def check_tool_error(run: Run) -> None:
    assert error_codes(run) == ["path_not_found", None]
    assert (run.workspace / "recovered.txt").exists()
    assert run.result.status == "success"
    results_sent_back(run)


def check_max_iterations(run: Run) -> None:
    assert run.result.error is not None
    assert run.result.error["code"] == "max_iterations_exceeded"
    # both turns' calls ran; no third model call
    assert run.model_turns() == 2 and error_codes(run) == [None, None]
    if run.caps.self_driving_loop:
        # documented: max_iterations is the CLI's max_turns, ended by error_max_turns
        assert run.result.error["message"] == "session ended: error_max_turns"
    else:
        assert run.result.error["message"] == "max_iterations (2) reached"


def check_budget(run: Run) -> None:
    assert run.result.error is not None and run.result.error["code"] == "budget_exceeded"
    turns = run.model_turns()
    spent = run.result.usage.cost_usd
    assert spent >= BUDGET_USD
    if run.caps.self_driving_loop:
        # documented: the CLI enforces max_budget_usd with its own cost of the usage reported
        assert run.result.error["message"] == "session ended: error_max_budget_usd"
        per_turn = spent / turns
    else:
        per_turn, _ = PriceTable().cost(MODELS[run.provider], NeutralUsage(
            input_tokens=BUDGET_USAGE.input_tokens, output_tokens=BUDGET_USAGE.output_tokens))
        assert spent == round(per_turn * turns, 6)
    # it stopped at the first turn that reached the budget, with steps left in the script
    assert turns == math.ceil(BUDGET_USD / per_turn - 1e-9) and turns < 8


def check_loop(run: Run) -> None:
    assert run.result.error is not None and run.result.error["code"] == "loop_detected"
    assert error_codes(run) == ["path_not_found"] * 5
    assert len(run.warnings("loop_warning")) == 2  # at the 3rd and the 4th repetition
    warning = "same arguments 3 times"
    if run.server is None:
        texts = [json.dumps(m.model_dump(mode="json")) for m in run.result.messages]
        assert any(warning in t for t in texts)
        return
    # the 4th model request carries the warning: as a user message for turn-based loops, in
    # the tool result for claude (documented: the gateway can only answer the tool call)
    fourth = run.requests[3]
    assert warning in fourth.raw_body.decode()
    in_result = any(warning in json.dumps(r.content) for r in run.server.tool_results(fourth))
    assert in_result is run.caps.self_driving_loop
    assert run.model_turns() == 5


def check_kill_switch(run: Run) -> None:
    assert run.result.error is not None
    assert run.result.error["code"] == "killswitch_engaged"
    assert run.switch is not None and run.switch.engaged
    if run.server is None:
        assert run.model_turns() == 1 and error_codes(run) == [None]
        return
    engaged_at = run.sink.requests_when_engaged
    assert engaged_at == 1
    if run.caps.self_driving_loop:
        # documented: the CLI owns the model calls; the gateway stops the session at the next
        # tool call, which is therefore never dispatched, and interrupts the CLI
        assert error_codes(run) == [None] and len(run.requests) == 2
    else:
        # the switch is checked before the next model call: nothing after it reached the server
        assert len(run.requests) == engaged_at and error_codes(run) == [None]


def check_500_then_success(run: Run) -> None:
    assert run.server is not None
    assert run.server.attempts(0) == 2  # the server counted the retry
    assert run.result.status == "success"
    retries = run.warnings("provider_retry")
    if run.caps.self_driving_loop:
        assert retries == []  # documented: the CLI retried itself; the loop does not nest
    else:
        assert len(retries) == 1


def check_400(run: Run) -> None:
    assert run.server is not None
    assert run.result.error is not None
    assert run.result.error["code"] == "provider_rejected"
    assert "400" in run.result.error["message"]
    assert run.warnings("provider_retry") == []  # the loop never retries a 400
    if not run.caps.self_driving_loop:
        assert len(run.requests) == 1 and run.server.remaining_steps == 3
        return
    # documented (observed with the bundled CLI): Claude Code answers a 400 by re-sending the
    # request without one of its optional ``anthropic-beta`` features at a time, then gives up;
    # a re-send is never the same request again
    betas = [set(r.headers.get("anthropic-beta", "").split(",")) for r in run.requests]
    assert len(betas) >= 2 and run.server.attempts(0) == len(betas)
    for before, after in zip(betas, betas[1:], strict=False):
        assert after < before


def check_invalid_arguments(run: Run) -> None:
    [bad, good] = run.envelopes()
    assert bad["error"]["code"] == "invalid_arguments"
    fields = {e["field"] for e in bad["error"]["details"]["errors"]}
    assert "path" in fields
    assert good["ok"] and run.result.status == "success"
    results_sent_back(run)


def check_text_fallback(run: Run) -> None:
    assert not run.result.parsed_result
    assert run.result.status == "partial"
    assert run.result.result.summary == "All done; I changed nothing."


def check_mcp(run: Run) -> None:
    echo, add = run.envelopes()
    assert echo["ok"] and echo["tool_name"] == "mcp__local__echo"
    assert "hello mcp" in json.dumps(echo["result"])
    assert add["ok"] and add["tool_name"] == "mcp__remote__add"
    assert "5" in json.dumps(add["result"])
    results_sent_back(run)


ROWS: tuple[Row, ...] = (
    Row("single_tool_call", (
        tool_calls([("workspace_write_file", {"path": "hello.txt", "content": "hello\n"})],
                   thought_signature=SIGNATURE),
        text(DONE),
    ), Outcome.FINISHED, check_single),
    Row("multi_step_fix_loop", (
        tool_calls([("workspace_write_file", {"path": "calc.py", "content": BUGGY}),
                    ("workspace_write_file", {"path": "test_calc.py", "content": TEST})]),
        tool_calls([RUN_TESTS]),
        tool_calls([("workspace_edit_file", {"path": "calc.py", "old_text": "a - b",
                                             "new_text": "a + b"})]),
        tool_calls([RUN_TESTS]),
        text(DONE),
    ), Outcome.FINISHED, check_multi_step),
    Row("tool_error_recovered", (
        tool_calls([("workspace_read_file", {"path": "missing.txt"})]),
        tool_calls([("workspace_write_file", {"path": "recovered.txt", "content": "ok\n"})]),
        text(DONE),
    ), Outcome.FINISHED, check_tool_error),
    Row("max_iterations_stop", tuple(_write(i) for i in range(5)),
        Outcome.MAX_ITERATIONS_EXCEEDED, check_max_iterations,
        limits=AgentLimits(max_iterations=2)),
    Row("budget_stop", tuple(_write(i, usage=BUDGET_USAGE) for i in range(8)),
        Outcome.BUDGET_EXCEEDED, check_budget, limits=AgentLimits(max_budget_usd=BUDGET_USD)),
    Row("loop_warning_then_stop",
        tuple(tool_calls([("workspace_read_file", {"path": "missing.txt"})]) for _ in range(7)),
        Outcome.LOOP_DETECTED, check_loop),
    Row("kill_switch_between_cycles", tuple(_write(i) for i in range(4)),
        Outcome.KILLSWITCH_ENGAGED, check_kill_switch, kill_after_tool_results=1),
    Row("provider_500_then_success", (error(500), text(DONE)), Outcome.FINISHED,
        check_500_then_success, not_applicable={"replay": NO_WIRE}),
    Row("provider_400_not_retried", (error(400),) * 3 + (text(DONE),), Outcome.ERROR, check_400,
        not_applicable={"replay": NO_WIRE}),
    Row("malformed_arguments", (
        tool_calls([("workspace_read_file", {"path": 42, "bogus": True})]),
        tool_calls([("workspace_write_file", {"path": "hello.txt", "content": "hello\n"})]),
        text(DONE),
    ), Outcome.FINISHED, check_invalid_arguments),
    Row("final_answer_not_json", (text("All done; I changed nothing."),), Outcome.FINISHED,
        check_text_fallback),
    Row("mcp_stdio_and_http", (
        tool_calls([("mcp__local__echo", {"text": "hello mcp"}),
                    ("mcp__remote__add", {"a": 2, "b": 3})]),
        text(DONE),
    ), Outcome.FINISHED, check_mcp),
)
