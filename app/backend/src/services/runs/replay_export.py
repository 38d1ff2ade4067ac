"""An execution's trajectory as a replay script (``studio run --provider replay --script``).

Each ``model_response`` of the journal becomes one turn: its tool calls (``domain.operation`` with
their arguments) or, for an answer, ``final`` with its text; the cost and tokens the following
``usage`` event recorded ride along, so a replay spends what the run spent. Only the last attempt
is taken (a resumed execution's journal restarts at its last ``started``). The same trajectory on
another provider, or again on this one, is then one command away.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

END_OF_RECORD = "(the recorded run ended here)"


def _turn(data: dict[str, Any]) -> dict[str, Any]:
    calls = data.get("tool_calls") or []
    if calls:
        return {"tool_calls": [{"tool": f"{call.get('domain')}.{call.get('operation')}",
                                "args": dict(call.get("args") or {})} for call in calls]}
    return {"final": str(data.get("text") or "")}


def replay_script(events: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """The replay script of a journal's last attempt (``(kind, data)`` pairs in order)."""
    starts = [i for i, (kind, _) in enumerate(events) if kind == "started"]
    turns: list[dict[str, Any]] = []
    for kind, data in events[starts[-1]:] if starts else events:
        if kind == "model_response":
            turns.append(_turn(data))
        elif kind == "usage" and turns and "usage" not in turns[-1]:
            delta = data.get("delta") or {}
            turns[-1]["usage"] = {"input_tokens": int(delta.get("input_tokens") or 0),
                                  "output_tokens": int(delta.get("output_tokens") or 0),
                                  "cost_usd": float(delta.get("cost_usd") or 0.0)}
    if not turns or "final" not in turns[-1]:
        turns.append({"final": END_OF_RECORD})
    return {"turns": turns}
