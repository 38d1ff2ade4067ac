"""The runtime settings of long runs (issue 33): hostile values refused naming the field; a low
mark above the high mark is taken as the high mark."""

from __future__ import annotations

import math
from typing import Any

import pytest

from services.db.runtime_settings import InvalidSettingValue, checked
from services.execution.agent_runtime import AgentDeps, FrontierAgent
from services.execution.guards import AgentLimits
from services.execution.providers.replay import ReplayClient, load_script
from services.execution.sinks import MemorySink
from services.execution.tool_domains.context import ToolDomainContext
from services.execution.tool_domains.dispatch import Dispatcher
from services.execution.tool_domains.registry import default_registry
from services.runs.loop import agent_limits


@pytest.mark.parametrize(("key", "value"), [
    ("context_high_mark", 1.5), ("context_high_mark", 0), ("context_high_mark", math.nan),
    ("context_high_mark", "0.8x"), ("context_low_mark", -0.1), ("context_low_mark", math.inf),
    ("context_window_tokens", -1), ("context_window_tokens", 1.5),
    ("context_window_tokens", 10**12), ("context_keep_turns", 0), ("compaction_enabled", "no"),
    ("context_token_budget", 10),
])
def test_hostile_values_are_refused_naming_the_field(key: str, value: Any) -> None:
    with pytest.raises(InvalidSettingValue) as caught:
        checked(key, value)
    assert caught.value.details["field"] == key


def test_recorded_limits_without_the_new_keys_keep_the_defaults(tmp_path: Any) -> None:
    old = {"max_iterations": 5, "max_budget_usd": 1.0, "wall_clock_s": 60.0, "stall_s": 30.0,
           "context_token_budget": 50_000}  # an execution recorded before issue 33
    limits = agent_limits(old)
    assert (limits.compaction_enabled, limits.context_window_tokens, limits.context_high_mark,
            limits.context_low_mark, limits.context_token_budget) == (True, 0, 0.8, 0.5, 50_000)
    ctx = ToolDomainContext(workspace_root=tmp_path, execution_id="e", request_id="r",
                            correlation_id="c")
    deps = AgentDeps(dispatcher=Dispatcher(default_registry()), ctx=ctx, sink=MemorySink(),
                     limits=AgentLimits(context_high_mark=0.6, context_low_mark=0.9,
                                        context_window_tokens=10_000))
    engine = ReplayClient(load_script({"turns": [{"final": "done"}]}), model="gpt-5.1")
    agent = FrontierAgent(engine, deps)
    policy = agent.context_keeper().policy
    assert (policy.window, policy.high_tokens, policy.low_tokens) == (10_000, 6_000, 6_000)
