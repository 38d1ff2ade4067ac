"""Flowchart graphs: validation names the node or edge at fault; templates; traversal planning."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from services.flowcharts.graph import FlowchartValidationError, NodeState, Problem, parse_graph
from services.flowcharts.templates import TemplateRenderError, render_template, template_context
from services.flowcharts.traversal import decide, plan

AGENT = {"provider": "replay", "prompt": "fix it"}


def _node(node_id: str, node_type: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": node_id, "type": node_type, "config": dict(config or {})}


def _edge(edge_id: str, source: str, target: str, condition: str | None = None) -> dict[str, Any]:
    edge: dict[str, Any] = {"id": edge_id, "source": source, "target": target}
    if condition is not None:
        edge["condition"] = condition
    return edge


def branching() -> dict[str, Any]:
    """start -> fix -> route -> (a | b) -> end."""
    return {
        "nodes": [_node("start", "start"), _node("fix", "agent", AGENT),
                  _node("route", "decision", {"field": "status"}),
                  _node("a", "agent", AGENT), _node("b", "agent", AGENT), _node("end", "end")],
        "edges": [_edge("e1", "start", "fix"), _edge("e2", "fix", "route"),
                  _edge("e3", "route", "a", "success"), _edge("e4", "route", "b", "partial"),
                  _edge("e5", "a", "end"), _edge("e6", "b", "end")],
    }


def _with(change: Any) -> dict[str, Any]:
    graph = copy.deepcopy(branching())
    change(graph)
    return graph


def _problems(graph: dict[str, Any]) -> list[Problem]:
    with pytest.raises(FlowchartValidationError) as info:
        parse_graph(graph)
    return info.value.problems


def test_the_branching_graph_is_valid() -> None:
    graph = parse_graph(branching())
    assert [n.id for n in graph.nodes] == ["start", "fix", "route", "a", "b", "end"]


MALFORMED: list[tuple[str, Any, str, dict[str, str]]] = [
    ("no start", lambda g: g["nodes"].pop(0) and g["edges"].pop(0), "no_start", {}),
    ("two starts", lambda g: (g["nodes"].append(_node("start2", "start")),
                              g["edges"].append(_edge("e9", "start2", "fix"))),
     "multiple_starts", {"node_id": "start2"}),
    ("unreachable node", lambda g: (g["nodes"].append(_node("lost", "agent", AGENT)),
                                    g["edges"].append(_edge("e9", "lost", "end"))),
     "unreachable_node", {"node_id": "lost"}),
    ("no path to an end", lambda g: (g["nodes"].append(_node("sink", "agent", AGENT)),
                                     g["edges"].append(_edge("e9", "fix", "sink"))),
     "no_path_to_end", {"node_id": "sink"}),
    ("unknown edge target", lambda g: g["edges"].append(_edge("e9", "fix", "nowhere")),
     "dangling_edge", {"edge_id": "e9"}),
    ("unknown edge source", lambda g: g["edges"].append(_edge("e9", "ghost", "end")),
     "dangling_edge", {"edge_id": "e9"}),
    ("condition off a decision", lambda g: g["edges"][1].update(condition="yes"),
     "condition_not_allowed", {"edge_id": "e2"}),
    ("decision edge without condition", lambda g: g["edges"][2].pop("condition"),
     "missing_condition", {"edge_id": "e3"}),
    ("two edges, one condition", lambda g: g["edges"][3].update(condition="success"),
     "duplicate_condition", {"edge_id": "e4"}),
    ("cycle", lambda g: g["edges"].append(_edge("back", "a", "fix")), "cycle",
     {"edge_id": "back"}),
    ("unknown node type", lambda g: g["nodes"][3].update(type="robot"), "unknown_node_type",
     {"node_id": "a"}),
    ("agent without prompt", lambda g: g["nodes"][1]["config"].pop("prompt"), "invalid_config",
     {"node_id": "fix"}),
    ("unknown config key", lambda g: g["nodes"][1]["config"].update(promt="x"),
     "invalid_config", {"node_id": "fix"}),
    ("template syntax", lambda g: g["nodes"][3]["config"].update(prompt="{{ nodes.fix "),
     "template_syntax", {"node_id": "a"}),
    ("command with argv and command", lambda g: g["nodes"].__setitem__(
        3, _node("a", "command", {"argv": ["true"], "command": "true"})),
     "invalid_config", {"node_id": "a"}),
    ("decision default unknown", lambda g: g["nodes"][2]["config"].update(default="nope"),
     "unknown_default_branch", {"node_id": "route"}),
    ("decision with two inputs", lambda g: g["edges"].append(_edge("e9", "start", "route")),
     "decision_source_required", {"node_id": "route"}),
    ("decision reads an unknown node", lambda g: g["nodes"][2]["config"].update(source="zz"),
     "unknown_decision_source", {"node_id": "route"}),
    ("duplicate node id", lambda g: g["nodes"].append(_node("fix", "end")),
     "duplicate_node_id", {"node_id": "fix"}),
    ("duplicate edge id", lambda g: g["edges"].append(_edge("e1", "fix", "end")),
     "duplicate_edge_id", {"edge_id": "e1"}),
    ("edge into start", lambda g: g["edges"].append(_edge("e9", "fix", "start")),
     "edge_into_start", {"edge_id": "e9"}),
    ("edge out of end", lambda g: (g["nodes"].append(_node("end2", "end")),
                                   g["edges"].append(_edge("e9", "end", "end2"))),
     "edge_from_end", {"edge_id": "e9"}),
    ("bad node id", lambda g: g["nodes"][1].update(id="has space"), "invalid_graph", {}),
]


@pytest.mark.parametrize(("change", "code", "names"), [case[1:] for case in MALFORMED],
                         ids=[case[0] for case in MALFORMED])
def test_malformed_graphs_are_refused_naming_the_problem(change: Any, code: str,
                                                         names: dict[str, str]) -> None:
    problems = _problems(_with(change))
    matching = [p for p in problems if p.code == code]
    assert matching, problems
    for key, value in names.items():
        assert getattr(matching[0], key) == value
        assert repr(value) in matching[0].message


def test_every_problem_is_listed_at_once() -> None:
    def two_faults(g: dict[str, Any]) -> None:
        g["nodes"][3]["type"] = "robot"
        g["edges"].append(_edge("e9", "fix", "nowhere"))
    codes = {p.code for p in _problems(_with(two_faults))}
    assert codes == {"unknown_node_type", "dangling_edge"}


def test_the_error_serialises_each_problem() -> None:
    with pytest.raises(FlowchartValidationError) as info:
        parse_graph(_with(lambda g: g["edges"].append(_edge("e9", "ghost", "end"))))
    assert info.value.to_json() == [{
        "code": "dangling_edge", "node_id": None, "edge_id": "e9",
        "message": "edge 'e9': unknown source node 'ghost'"}]


def test_a_missing_template_key_is_an_error_naming_the_node() -> None:
    context = template_context({"fix": {"status": "success", "summary": "done"}}, {})
    assert render_template("a", "after: {{ nodes.fix.result.summary }}", context) == "after: done"
    with pytest.raises(TemplateRenderError, match=r"node 'a'.*pr_link"):
        render_template("a", "{{ nodes.fix.result.pr_link }}", context)
    with pytest.raises(TemplateRenderError, match=r"node 'a'.*skipped"):
        render_template("a", "{{ nodes.skipped.result.summary }}", context)


def test_templates_are_sandboxed() -> None:
    with pytest.raises(TemplateRenderError, match="node 'a'"):
        render_template("a", "{{ ''.__class__.__mro__ }}", template_context({}, {}))


def _states(**states: NodeState) -> dict[str, NodeState]:
    graph = parse_graph(branching())
    return {n.id: states.get(n.id, NodeState.PENDING) for n in graph.nodes}


def test_plan_skips_the_branch_not_taken_and_fan_in_waits_only_for_live_inputs() -> None:
    graph = parse_graph(branching())
    assert plan(graph, _states(), {}).ready == ["start"]
    done = NodeState.SUCCEEDED
    states = _states(start=done, fix=done, route=done)
    results = {"fix": {"status": "success"}, "route": decide(graph, "route",
                                                             {"fix": {"status": "success"}})}
    assert results["route"]["branch"] == "success"
    step = plan(graph, states, results)
    assert step.ready == ["a"] and step.skipped == ["b"]
    states.update(a=NodeState.RUNNING, b=NodeState.SKIPPED)
    assert plan(graph, states, results).ready == []  # end waits for a, not for b
    states["a"] = done
    assert plan(graph, states, results).ready == ["end"]


def test_decisions_use_the_default_or_fail_naming_the_field() -> None:
    graph = parse_graph(_with(lambda g: g["nodes"][2]["config"].update(default="partial")))
    assert decide(graph, "route", {"fix": {"status": "blocked"}})["branch"] == "partial"
    strict = parse_graph(branching())
    with pytest.raises(ValueError, match=r"'route'.*'blocked'"):
        decide(strict, "route", {"fix": {"status": "blocked"}})
    with pytest.raises(ValueError, match=r"no field 'status'"):
        decide(strict, "route", {"fix": {}})


@pytest.mark.parametrize(("policy", "needle"), [
    ({"command.run": "sometimes"}, "must be"), ({"nope.*": "deny"}, "no known domain"),
    ({"command.run": "require"}, "only a node with a repository"), ("deny", "JSON object"),
])
def test_an_agent_nodes_approval_policy_is_validated_naming_the_node(
        policy: Any, needle: str) -> None:
    graph = _with(lambda g: g["nodes"][1]["config"].update(approval_policy=policy))
    problems = _problems(graph)
    assert problems and all(p.node_id == "fix" for p in problems)
    if isinstance(policy, dict):
        assert [p.code for p in problems] == ["invalid_approval_policy"]
    assert needle in problems[0].message


def test_a_repository_node_may_require_an_approval() -> None:
    graph = _with(lambda g: g["nodes"][1]["config"].update(
        repo_url="https://github.com/octo/repo", approval_policy={"command.run": "require"}))
    assert parse_graph(graph).nodes[1].config["approval_policy"] == {"command.run": "require"}


def test_an_agent_node_may_allow_and_deny() -> None:
    graph = _with(lambda g: g["nodes"][1]["config"].update(
        approval_policy={"git.*": "deny", "git.status": "allow"}))
    assert parse_graph(graph).nodes[1].config["approval_policy"] == {"git.*": "deny",
                                                                      "git.status": "allow"}
