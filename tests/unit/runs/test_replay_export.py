"""A journal becomes a replay script the replay provider accepts: one turn per model response,
the usage of each turn with it, only the last attempt."""

from __future__ import annotations

from typing import Any

from services.execution.providers.replay import load_script
from services.runs.replay_export import END_OF_RECORD, replay_script


def _call(domain: str, operation: str, **args: Any) -> dict[str, Any]:
    return {"call_id": "1-0", "tool_name": f"{domain}_{operation}", "domain": domain,
            "operation": operation, "args": args}


def _usage(cost: float) -> tuple[str, dict[str, Any]]:
    return "usage", {"delta": {"input_tokens": 10, "output_tokens": 2, "cost_usd": cost},
                     "total": {}}


def test_each_model_response_is_a_turn_with_its_usage() -> None:
    events = [
        ("started", {}), ("model_request", {}),
        ("model_response", {"text": "", "tool_calls": [_call("command", "run", argv=["ls"])]}),
        _usage(0.01), ("tool_call", {}), ("tool_result", {}),
        ("model_response", {"text": '{"status": "success"}', "tool_calls": []}), _usage(0.02),
        ("finished", {}), ("finalize", {"step": "commit"}),
    ]
    script = replay_script(events)
    assert script == {"turns": [
        {"tool_calls": [{"tool": "command.run", "args": {"argv": ["ls"]}}],
         "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.01}},
        {"final": '{"status": "success"}',
         "usage": {"input_tokens": 10, "output_tokens": 2, "cost_usd": 0.02}},
    ]}
    assert len(load_script(script).turns) == 2


def test_only_the_last_attempt_counts_and_an_unfinished_run_gets_an_end() -> None:
    events = [
        ("started", {}), ("model_response", {"tool_calls": [_call("workspace", "list_dir")]}),
        ("started", {}), ("model_response", {"tool_calls": [_call("git", "status")]}),
    ]
    script = replay_script(events)
    assert script["turns"] == [{"tool_calls": [{"tool": "git.status", "args": {}}]},
                               {"final": END_OF_RECORD}]
    assert load_script(script).turns[-1].final == END_OF_RECORD
