"""What a ``run`` token may name in a flowchart, over real HTTP against a running ``studio api``:
no host path (the run owns a directory), node workspaces that cannot be swapped for a symlink,
templates whose errors end the run, limits capped by the deployment, and nodes that never run in
the API's process (a hostile regular expression leaves ``/healthz`` answering)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import statistics
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from services.execution.tool_domains.workspace.regex import SEARCH_BUDGET_S
from tests.integration.api.server import ApiServer, running_api
from tests.integration.flowcharts.graphs import agent, edges, final, node
from tests.unit.execution.command_helpers import gone, marker_pids, sleep_marker

FINAL = {"succeeded", "failed", "cancelled"}
WAIT_S = 120.0  # an upper bound for waits, never a performance assertion
# /healthz during a hostile search, against a baseline taken in the same test (not a time)
HEALTHZ_BASELINE_SAMPLES = 30
HEALTHZ_FACTOR = 10


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


def wait_execution(api: ApiServer, execution_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    with api.client(api.admin) as client:
        while time.monotonic() < deadline:
            data: dict[str, Any] = client.get(f"/api/executions/{execution_id}").json()
            if data["finished_at"] is not None:
                return data
            time.sleep(0.1)
    raise AssertionError(f"execution {execution_id} did not finish")


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
    graph = chain(command("look", "ls -a; true"))
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


@dataclass(frozen=True)
class LeakProbe:
    """What a command node of a second run printed while it tried to read what is not its own:
    a secret planted in the workspace root (another execution's clone) and one in the first
    run's directory, each by a path relative to its working directory and by an absolute one."""

    secrets: dict[str, str]  # "root" / "sibling" -> the planted text
    sibling: str  # the first run's directory name
    stdout: str
    whole: str  # the second run, its node's execution and tool calls, as the API gives them
    sandbox: str


def probe_for_leaks(api: ApiServer) -> LeakProbe:
    secrets = {"root": f"ROOT-SECRET-{uuid.uuid4().hex}",
               "sibling": f"SIBLING-SECRET-{uuid.uuid4().hex}"}
    victim = root(api) / "victim-execution" / "repo"
    victim.mkdir(parents=True, exist_ok=True)
    (victim / "secret.txt").write_text(secrets["root"] + "\n")
    first = wait(api, run(api, chain(command("own", "echo mine > own.txt"))))
    assert first["status"] == "succeeded", first
    first_dir = Path(first["workspace"])
    (first_dir / "secret.txt").write_text(secrets["sibling"] + "\n")
    paths = [f"../{first_dir.name}/secret.txt", f"{first_dir}/secret.txt",
             "../../victim-execution/repo/secret.txt", f"{victim}/secret.txt"]
    script = ("for p in " + " ".join(shlex.quote(p) for p in paths)
              + "; do cat \"$p\" 2>&1; done; ls -a .. ../.. 2>&1; true")
    second = wait(api, run(api, chain(command("look", script))))
    assert second["status"] == "succeeded", second
    result = second["nodes"]["look"]["result"]
    execution_id = second["nodes"]["look"]["execution_id"]
    with api.client(api.admin) as client:
        execution = client.get(f"/api/executions/{execution_id}").json()
        calls = client.get(f"/api/executions/{execution_id}/tool-calls").json()
    whole = json.dumps([second, execution, calls])
    return LeakProbe(secrets, first_dir.name, result["stdout"], whole, result["sandbox"])


def test_a_command_node_cannot_read_a_sibling_run_or_the_workspace_root(api: ApiServer) -> None:
    """The witness: both secrets, four reads, none in anything the second run left."""
    probe = probe_for_leaks(api)
    assert probe.sandbox != "none", probe
    for secret in probe.secrets.values():
        assert secret not in probe.whole, probe.stdout
    listed = probe.stdout.splitlines()
    assert "victim-execution" not in listed and probe.sibling not in listed, probe.stdout


@pytest.fixture(scope="module")
def unconfined_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """The same API with ``STUDIO_SANDBOX=none``: commands run with the host's view."""
    with running_api(tmp_path_factory.mktemp("api-none"),
                     extra_env={"STUDIO_SANDBOX": "none"}) as server:
        yield server


def test_control_without_a_sandbox_the_same_probe_reads_both_secrets(
        unconfined_api: ApiServer) -> None:
    """The control: with no sandbox, each of the four reads succeeds and the witness of the test
    above finds both secrets (twice each), and the listing shows the root's and sibling's
    entries: the probe aims at the planted files."""
    probe = probe_for_leaks(unconfined_api)
    assert probe.sandbox == "none", probe
    for secret in probe.secrets.values():
        assert probe.stdout.count(secret) == 2, probe.stdout
        assert secret in probe.whole
    listed = probe.stdout.splitlines()
    assert "victim-execution" in listed and probe.sibling in listed, probe.stdout


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
    """The running command is a ``sleep`` of at least 1000 s (a unique length, to find it in
    ``/proc``): after the cancel its process is gone and the run has ended, both well within
    ``WAIT_S`` (120 s), so the sleep was killed, not waited for."""
    marker = sleep_marker()
    assert float(marker) >= 1000
    run_id = run(api, chain(command("slow", f"sleep {marker}", timeout_s=3600),
                            command("next", "true")))
    wait(api, run_id, until=lambda d: d["nodes"]["slow"]["execution_id"] is not None)
    deadline = time.monotonic() + WAIT_S
    while not marker_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker_pids(marker), "the sleep never started"
    began = time.monotonic()
    with api.client(api.admin) as client:
        cancelled = client.post(f"/api/flowchart-runs/{run_id}/cancel").json()
    assert cancelled["status"] == "cancelled"
    assert cancelled["nodes"]["next"]["state"] == "cancelled"
    assert gone(marker), "the cancelled run's sleep is still running"
    ended = wait(api, run_id, until=lambda d: d["finished_at"] is not None)
    assert time.monotonic() - began < WAIT_S < float(marker)  # not the sleep's own end
    assert ended["status"] == "cancelled", ended
    assert ended["nodes"]["slow"]["state"] == "cancelled", ended
    execution_id = ended["nodes"]["slow"]["execution_id"]
    execution = wait_execution(api, execution_id)
    assert (execution["status"], execution["error_code"]) == ("cancelled", "cancelled"), execution


def _healthz_seconds(client: httpx2.Client) -> float:
    began = time.monotonic()
    assert client.get("/healthz").status_code == 200
    return time.monotonic() - began


def _p(samples: list[float], percent: int) -> float:
    """The ``percent``-th percentile of ``samples``."""
    return statistics.quantiles(samples, n=100, method="inclusive")[percent - 1]


def test_a_hostile_search_times_out_while_healthz_keeps_answering(api: ApiServer) -> None:
    """Finding 3: ``workspace.search`` with a backtracking pattern ran in the API's process.

    ``/healthz`` is compared with itself: a baseline taken just before, on the same client, and
    the samples taken while the search spends its whole budget (10 s) in a node's child process.
    Had it run in the API's process, an answer would wait for the search (seconds, hundreds of
    times the baseline): the median sample is bounded by a multiple of the baseline's 90th
    percentile, and no sample comes near the search's budget; no absolute time is asserted."""
    script = {"turns": [{"tool_calls": [{"tool": "workspace.search",
                                         "args": {"pattern": "^(a|a)+$"}}]},
                        {"final": {"status": "success", "summary": "went on"}}]}
    graph = chain(command("bait", "printf '%s' \"$(printf 'a%.0s' $(seq 60))b\" > bait.txt"),
                  node("grep", "agent", **agent("search", script)))
    samples: list[float] = []
    with httpx2.Client(base_url=api.url, timeout=30) as client:
        baseline = [_healthz_seconds(client) for _ in range(HEALTHZ_BASELINE_SAMPLES)]
        run_id = run(api, graph)
        wait(api, run_id, until=lambda d: d["nodes"]["grep"]["state"] != "pending")
        while get(api, run_id)["nodes"]["grep"]["state"] == "running":
            samples.append(_healthz_seconds(client))
            time.sleep(0.2)
    data = wait(api, run_id)
    assert data["status"] == "succeeded", data
    assert data["nodes"]["grep"]["result"]["summary"] == "went on"
    with api.client(api.admin) as client:
        calls = client.get(f"/api/executions/{data['nodes']['grep']['execution_id']}"
                           "/tool-calls").json()["tool_calls"]
    assert [(c["operation"], c["error_code"]) for c in calls] == [("search", "search_timeout")]
    assert len(samples) >= 10, samples  # the search ran for its whole budget meanwhile
    bound = HEALTHZ_FACTOR * _p(baseline, 90)
    assert statistics.median(samples) <= bound, (bound, baseline, samples)
    # none waited for the search (its budget: what an answer blocked behind it would take)
    assert max(samples) < SEARCH_BUDGET_S / 2, samples
