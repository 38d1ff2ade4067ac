"""What a ``run`` token may name in a flowchart, over real HTTP against a running ``studio api``:
no host path (the run owns a directory), node workspaces that cannot be swapped for a symlink,
templates whose errors end the run, limits capped by the deployment, and nodes that never run in
the API's process (a hostile regular expression leaves ``/healthz`` answering)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tests.integration.api.server import ApiServer
from tests.integration.flowcharts.graphs import agent, edges, final, node

FINAL = {"succeeded", "failed", "cancelled"}
WAIT_S = 120.0  # an upper bound for waits, never a performance assertion
HEALTHZ_BOUND_S = 0.2  # the latency the issue names for /healthz during a hostile search


def chain(*work: dict[str, Any]) -> dict[str, Any]:
    """start -> each node of ``work`` in turn -> end."""
    ids = ["start", *(n["id"] for n in work), "end"]
    return {"nodes": [node("start", "start"), *work, node("end", "end")],
            "edges": edges(*zip(ids, ids[1:], strict=False))}


def command(node_id: str, text: str, **config: Any) -> dict[str, Any]:
    return node(node_id, "command", command=text, **config)


def start(api: ApiServer, graph: dict[str, Any], token: str | None = None,
          **body: Any) -> httpx2.Response:
    with api.client(token or api.admin) as client:
        created = client.post("/api/flowcharts", json={"name": "t", "graph": graph})
        assert created.status_code == 201, created.text
        return client.post(f"/api/flowcharts/{created.json()['id']}/runs", json=body)


def run(api: ApiServer, graph: dict[str, Any], **body: Any) -> str:
    started = start(api, graph, **body)
    assert started.status_code == 202, started.text
    run_id: str = started.json()["id"]
    return run_id


def get(api: ApiServer, run_id: str) -> dict[str, Any]:
    with api.client(api.admin) as client:
        data: dict[str, Any] = client.get(f"/api/flowchart-runs/{run_id}").json()
        return data


def wait(api: ApiServer, run_id: str, until: Any = None) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        data = get(api, run_id)
        if (until(data) if until else data["status"] in FINAL):
            return data
        time.sleep(0.1)
    raise AssertionError(f"run {run_id} did not get there:\n" + "".join(api.log[-40:]))


def root(api: ApiServer) -> Path:
    return Path(api.env["STUDIO_WORKSPACE_DIR"]).resolve()


# -- paths ---------------------------------------------------------------------------------------


def test_a_symlink_made_by_a_command_node_never_becomes_an_agent_workspace(
        api: ApiServer) -> None:
    """Finding 1: ``rm -rf d && ln -s / d``, then an agent node working in ``d``."""
    script = {"turns": [{"tool_calls": [{"tool": "workspace.read_file",
                                         "args": {"path": "etc/hostname"}}]},
                        {"final": {"status": "success", "summary": "read it"}}]}
    graph = chain(command("swap", "mkdir -p d && rm -rf d && ln -s / d"),
                  node("steal", "agent", **agent("read", script, workspace="d")))
    data = wait(api, run(api, graph))
    assert data["status"] == "failed", data
    assert data["nodes"]["swap"]["state"] == "succeeded"
    steal = data["nodes"]["steal"]
    assert (steal["state"], steal["error_code"]) == ("failed", "workspace_refused"), steal
    assert steal["execution_id"] is None  # no execution ever got the host's root
    assert os.path.islink(Path(data["workspace"]) / "d")


def test_an_agent_node_gets_its_own_subdirectory_of_the_run(api: ApiServer) -> None:
    script = {"turns": [{"tool_calls": [{"tool": "workspace.write_file",
                                         "args": {"path": "out.txt", "content": "hi\n"}}]},
                        {"final": {"status": "success", "summary": "wrote"}}]}
    data = wait(api, run(api, chain(node("w", "agent", **agent("write", script,
                                                               workspace="own/sub")))))
    assert data["status"] == "succeeded", data
    run_dir = Path(data["workspace"])
    assert (run_dir / "own" / "sub" / "out.txt").read_text() == "hi\n"
    with api.client(api.admin) as client:
        execution = client.get(f"/api/executions/{data['nodes']['w']['execution_id']}").json()
    assert execution["workspace"] == str(run_dir / "own" / "sub")


@pytest.mark.parametrize("where", ["/etc", "../other", "a/../../b", ".git", "", "a//b"])
def test_a_node_workspace_is_a_relative_name_inside_the_run(api: ApiServer, where: str) -> None:
    graph = chain(node("a", "agent", **agent("x", final("success", "ok"), workspace=where)))
    with api.client(api.admin) as client:
        refused = client.post("/api/flowcharts", json={"name": "t", "graph": graph})
    assert refused.status_code == 422, refused.text
    problem = refused.json()["error"]["details"]["problems"][0]
    assert (problem["code"], problem["node_id"]) == ("invalid_config", "a")


def test_the_api_takes_no_host_path_and_each_run_owns_a_directory(api: ApiServer) -> None:
    """Finding 2: a run whose workspace was the workspace root saw other executions' clones."""
    victim = root(api) / "victim-execution" / "repo"
    victim.mkdir(parents=True, exist_ok=True)
    (victim / "secret.txt").write_text("another execution's clone\n")
    graph = chain(command("look", "ls -a; ls -a .. 2>&1; cat ../victim-execution/repo/secret.txt"
                                  " 2>&1; true"))
    refused = start(api, graph, workspace=str(root(api)))
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["code"] == "host_path_refused"
    first, second = wait(api, run(api, graph)), wait(api, run(api, graph))
    assert first["status"] == second["status"] == "succeeded", (first, second)
    dirs = {Path(first["workspace"]), Path(second["workspace"])}
    assert len(dirs) == 2
    for run_dir in dirs:
        assert run_dir.parent == root(api) / "flowchart-runs" and run_dir.is_dir()
        assert oct(run_dir.stat().st_mode & 0o777) == "0o700"
    stdout = first["nodes"]["look"]["result"]["stdout"]
    assert "victim-execution" not in stdout.splitlines(), stdout  # not listed by ls -a ..
    assert "another execution's clone" not in stdout


# -- templates -----------------------------------------------------------------------------------


@pytest.mark.parametrize("template", ["{{ 1/0 }}", "{{ 1 + 'a' }}", "{{ range(100001) }}",
                                      "{{ 'a' * 100000000 }}", "{{ inputs.missing }}"])
def test_every_template_error_fails_the_node_and_ends_the_run(api: ApiServer,
                                                             template: str) -> None:
    """Finding 5: errors that are not ``TemplateError`` left the run running forever."""
    graph = chain(command("c", f"echo {template}"),
                  node("a", "agent", **agent(f"p {template}", final("success", "no"))))
    data = wait(api, run(api, graph))
    assert data["status"] == "failed", data
    assert data["error_code"] == "template_error"
    assert data["nodes"]["c"]["state"] == "failed"
    assert data["nodes"]["c"]["error_code"] == "template_error"
    assert data["nodes"]["a"]["state"] == "cancelled"


def test_shell_quote_and_argv_keep_values_out_of_the_shell(api: ApiServer) -> None:
    """Finding 7: a value with quotes and ``;`` stays one argument."""
    hostile = "x'; touch pwned; echo '"
    graph = chain(command("quoted", "printf %s {{ inputs.v | shell_quote }}"),
                  node("argv", "command", argv=["printf", "%s", "{{ inputs.v }}"]))
    data = wait(api, run(api, graph, inputs={"v": hostile}))
    assert data["status"] == "succeeded", data
    assert data["nodes"]["quoted"]["result"]["stdout"] == hostile
    assert data["nodes"]["argv"]["result"]["stdout"] == hostile
    assert not (Path(data["workspace"]) / "pwned").exists()


# -- limits --------------------------------------------------------------------------------------


def test_a_run_token_may_lower_limits_and_only_admin_may_raise_them(api: ApiServer) -> None:
    """Finding 7: a ``run`` token set ``max_budget_usd`` up to 10,000 per execution."""
    runner = api.token("runner", ["read", "run"])
    rich = chain(node("a", "agent", **agent("x", final("success", "ok"),
                                            limits={"max_budget_usd": 10_000})))
    refused = start(api, rich, token=runner)
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["code"] == "limit_above_ceiling"
    assert error["details"]["field"] == "nodes.a.config.limits"
    assert error["details"]["limits"]["max_budget_usd"]["requested"] == 10_000
    as_text = chain(node("a", "agent", **agent("x", final("success", "ok"),
                                               limits={"max_budget_usd": "1e4"})))
    assert start(api, as_text, token=runner).status_code == 403
    many = start(api, chain(command("c", "true")), token=runner, max_node_executions=10_000)
    assert many.status_code == 403 and many.json()["error"]["code"] == "limit_above_ceiling"
    cheap = chain(node("a", "agent", **agent("x", final("success", "ok"),
                                             limits={"max_budget_usd": 0.5})))
    assert start(api, cheap, token=runner, max_node_executions=3).status_code == 202
    assert start(api, rich).status_code == 202  # admin


# -- nodes out of the API's process --------------------------------------------------------------


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _node_child(api: ApiServer, run_id: str) -> int | None:
    for pid in _children(api.process.pid):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"flowchart-node" in argv and run_id.encode() in argv:
            return pid
    return None


def test_a_node_runs_in_a_child_process_and_its_death_ends_the_run(api: ApiServer) -> None:
    run_id = run(api, chain(command("slow", "sleep 60", timeout_s=120)))
    deadline = time.monotonic() + WAIT_S
    pid = None
    while pid is None and time.monotonic() < deadline:
        pid = _node_child(api, run_id)
        time.sleep(0.1)
    assert pid is not None, "no studio flowchart-node child of the API ran the node"
    os.kill(pid, signal.SIGKILL)
    data = wait(api, run_id)
    assert data["status"] == "failed", data
    assert data["nodes"]["slow"]["error_code"] == "substrate_error"


def test_cancel_ends_a_run_at_once(api: ApiServer) -> None:
    run_id = run(api, chain(command("slow", "sleep 60", timeout_s=120), command("next", "true")))
    wait(api, run_id, until=lambda d: d["nodes"]["slow"]["execution_id"] is not None)
    with api.client(api.admin) as client:
        cancelled = client.post(f"/api/flowchart-runs/{run_id}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["nodes"]["next"]["state"] == "cancelled"


def test_a_hostile_search_times_out_while_healthz_keeps_answering(api: ApiServer) -> None:
    """Finding 3: ``workspace.search`` with a backtracking pattern ran in the API's process."""
    script = {"turns": [{"tool_calls": [{"tool": "workspace.search",
                                         "args": {"pattern": "^(a|a)+$"}}]},
                        {"final": {"status": "success", "summary": "went on"}}]}
    graph = chain(command("bait", "printf '%s' \"$(printf 'a%.0s' $(seq 60))b\" > bait.txt"),
                  node("grep", "agent", **agent("search", script)))
    run_id = run(api, graph)
    wait(api, run_id, until=lambda d: d["nodes"]["grep"]["state"] != "pending")
    samples: list[float] = []
    with httpx2.Client(base_url=api.url, timeout=30) as client:
        while get(api, run_id)["nodes"]["grep"]["state"] == "running":
            began = time.monotonic()
            assert client.get("/healthz").status_code == 200
            samples.append(time.monotonic() - began)
            time.sleep(0.2)
    data = wait(api, run_id)
    assert data["status"] == "succeeded", data
    assert data["nodes"]["grep"]["result"]["summary"] == "went on"
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{data['nodes']['grep']['execution_id']}"
                           "/tool-calls").json()["tool_calls"]
    assert [(c["operation"], c["error_code"]) for c in calls] == [("search", "search_timeout")]
    assert len(samples) >= 10, samples  # the search ran for its whole budget meanwhile
    assert max(samples) < HEALTHZ_BOUND_S, samples
