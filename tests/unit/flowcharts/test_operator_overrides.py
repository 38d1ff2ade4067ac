"""Every ``__``-prefixed key a node config accepts is a known operator override (so the API's
check, :mod:`services.api.overrides`, covers it), and each override is reported with its node."""

from __future__ import annotations

from services.db.runtime_settings import OPERATOR_OVERRIDES, RUNTIME_SETTINGS
from services.flowcharts.graph import CONFIG_MODELS, FlowchartGraph, operator_overrides


def test_every_double_underscore_config_key_is_a_known_operator_override() -> None:
    accepted = {field.alias for model in CONFIG_MODELS.values()
                for field in model.model_fields.values()
                if field.alias and field.alias.startswith("__")}
    assert accepted == set(OPERATOR_OVERRIDES)
    assert set(OPERATOR_OVERRIDES.values()) <= set(RUNTIME_SETTINGS)


def test_overrides_are_reported_per_node_and_null_is_none() -> None:
    graph = FlowchartGraph.model_validate({"nodes": [
        {"id": "a", "type": "agent", "config": {"__agent_runtime_cutover_enabled": False}},
        {"id": "b", "type": "agent", "config": {"__agent_runtime_cutover_enabled": None}},
        {"id": "c", "type": "command", "config": {"__anything": 1}},
    ]})
    found = [(p.code, p.node_id) for p in operator_overrides(graph)]
    assert found == [("operator_override_refused", "a"), ("operator_override_refused", "c")]
