"""The setup phase's inputs as hostile values: the repository's ``.studio/setup.json``, an
execution's ``setup``/``network``/``network_allowlist``, a flowchart node's config, the
deployment's allowlist; sandboxes that cannot enforce it; the pull request's section."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from services.cli.journal_text import event_lines
from services.execution.errors import ConfigError, ExecutionError, ToolFailure
from services.execution.network.allowlist import parse_allowlist
from services.execution.network.proxy import EgressProxy
from services.execution.sandbox.egress import egress_sandbox
from services.execution.sandbox.selection import LandlockSandbox, NoSandbox
from services.executors.selection import forwarded_environment
from services.flowcharts.graph import AgentConfig
from services.repos.dependency_caches import (
    dependency_caches,
    repository_scope,
    request_scope,
)
from services.repos.urls import ValidatedRepo, validate_repo_url
from services.runs.request import ExecutionRequest
from services.runs.setup_file import repository_setup_commands
from services.runs.setup_phase import blocked_note, execution_policy
from tests.support.settings import studio_settings

REPO = "https://github.com/acme/widgets.git"


def _file(tmp_path: Path, content: bytes | str) -> Path:
    (tmp_path / ".studio").mkdir()
    data = content.encode() if isinstance(content, str) else content
    (tmp_path / ".studio" / "setup.json").write_bytes(data)
    return tmp_path


def test_a_repository_without_the_file_has_no_setup(tmp_path: Path) -> None:
    assert repository_setup_commands(tmp_path) == []


def test_the_repository_file_is_read(tmp_path: Path) -> None:
    assert repository_setup_commands(_file(tmp_path, '{"commands": ["make deps"]}')) == [
        "make deps"]


@pytest.mark.parametrize("content", [
    "not json", b"\xff\xfe{}", "[]", '"commands"', "{}", '{"commands": "make"}',
    '{"commands": ["ok"], "hosts": ["evil.org"]}', '{"commands": [""]}', '{"commands": [1]}',
    '{"commands": ["a\\u0000b"]}', '{"commands": ["' + "x" * 9000 + '"]}',
    '{"commands": [' + ",".join(['"x"'] * 33) + "]}", '{"commands": [{"run": "x"}]}',
    "[" * 100_000, '{"commands": ["' + "x" * 70_000 + '"]}',
])
def test_a_hostile_repository_file_fails_the_setup(tmp_path: Path, content: str | bytes) -> None:
    with pytest.raises(ExecutionError) as caught:
        repository_setup_commands(_file(tmp_path, content))
    assert caught.value.code == "setup_failed" and ".studio/setup.json" in caught.value.message


def test_symlinks_and_special_files_are_not_followed(tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text('{"commands": ["cat /etc/shadow"]}')
    ws = tmp_path / "ws"
    (ws / ".studio").mkdir(parents=True)
    os.symlink(secret, ws / ".studio" / "setup.json")
    with pytest.raises(ExecutionError, match="regular file"):
        repository_setup_commands(ws)
    other = tmp_path / "other"
    other.mkdir()
    os.symlink(ws / ".studio", other / ".studio")
    with pytest.raises(ExecutionError, match="not a directory"):
        repository_setup_commands(other)
    fifo = tmp_path / "fifo"
    (fifo / ".studio").mkdir(parents=True)
    os.mkfifo(fifo / ".studio" / "setup.json")
    with pytest.raises(ExecutionError, match="regular file"):
        repository_setup_commands(fifo)


@pytest.mark.parametrize("fields", [
    {"setup": ("",)}, {"setup": ("a\x00b",)}, {"setup": ("x" * 9000,)},
    {"setup": tuple(["true"] * 33)}, {"network": "online"}, {"network": "ALLOWLIST"},
    {"network_allowlist": ("127.0.0.1:5432",)}, {"network_allowlist": ("[::1]:6379",)},
    {"network_allowlist": ("user@evil.org",)}, {"network_allowlist": ("evil.org:0",)},
    {"network_allowlist": (".org",)},
])
def test_hostile_request_fields_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        ExecutionRequest(provider="replay", prompt="p", repo_url=REPO, **fields)


def test_setup_needs_a_repository(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="repository"):
        ExecutionRequest(provider="replay", prompt="p", workspace=tmp_path, setup=("true",))
    request = ExecutionRequest(provider="replay", prompt="p", repo_url=REPO, setup=["true"],
                               network="allowlist", network_allowlist=["example.org"])
    assert request.stored()["setup"] == ("true",)
    assert request.stored()["network"] == "allowlist"


@pytest.mark.parametrize("config", [
    {"setup": ["true"]},  # no repo_url
    {"repo_url": REPO, "setup": "make"}, {"repo_url": REPO, "network": "internet"},
    {"repo_url": REPO, "network_allowlist": ["10.0.0.1:80"]},
])
def test_node_config_is_checked(config: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        AgentConfig.model_validate({"provider": "replay", "prompt": "p", **config})


def test_a_bad_deployment_allowlist_names_the_setting(tmp_path: Path) -> None:
    request = ExecutionRequest(provider="replay", prompt="p", repo_url=REPO, setup=("true",))
    settings = studio_settings(tmp_path, setup_allowlist=["pypi.org", "user@evil"])
    with pytest.raises(ConfigError, match="STUDIO_SETUP_ALLOWLIST"):
        execution_policy(settings, request)
    good = studio_settings(tmp_path, setup_allowlist="127.0.0.1:3141, .example.org")
    assert execution_policy(good, request).entries() == [".example.org", "127.0.0.1:3141"]


def test_sandboxes_that_cannot_enforce_the_allowlist_are_refused(tmp_path: Path) -> None:
    proxy = EgressProxy(parse_allowlist([], addresses=True), tmp_path / "proxy.sock")
    for base in (NoSandbox(), LandlockSandbox(), None):
        with pytest.raises(ToolFailure) as caught:
            egress_sandbox(base, proxy, None)
        assert caught.value.code == "sandbox_unavailable"


def test_each_repository_branch_and_writer_has_its_own_cache(tmp_path: Path) -> None:
    caches = dependency_caches(studio_settings(tmp_path))

    def repo(url: str) -> ValidatedRepo:
        return validate_repo_url(url, from_api=True)

    main = repository_scope(repo(REPO), "main")
    assert main == repository_scope(repo("https://GitHub.com/acme/widgets/"), "main")
    request = request_scope(repo(REPO), "main", ["make deps"], ["example.org"])
    others = {repository_scope(repo("https://github.com/acme/gadgets"), "main").key,
              repository_scope(repo(REPO), "evil").key,
              repository_scope(repo(REPO), "main", ["evil.org"]).key,
              request.key, request_scope(repo(REPO), "evil", ["make deps"], ["example.org"]).key,
              request_scope(repo(REPO), "main", ["make deps", "true"], ["example.org"]).key,
              request_scope(repo(REPO), "main", ["make deps"], []).key}
    assert main.key not in others and len(others) == 7
    with caches.use(main) as one, caches.use(request) as two:
        assert one != two and one.parent.parent == two.parent.parent == caches.root
        assert one.parent.stat().st_mode & 0o777 == 0o700


def test_the_pull_request_section_cannot_be_broken_out_of() -> None:
    hostile = {"command": "curl x`\n# Injected\n<script>", "method": "CONNECT",
               "host": "evil.org", "port": 443, "reason": "host not on the allowlist"}
    note = blocked_note([("network", {"phase": "setup", "blocked": [hostile] * 60})])
    lines = note.splitlines()
    assert lines[0] == "Blocked network requests (egress proxy):"
    assert len(lines) == 52 and lines[-1].startswith("- ... and 10 more")
    assert all(line.startswith("- ") for line in lines[1:])
    assert "`curl x' # Injected <script>`" in lines[1]
    assert blocked_note([("network", {"phase": "setup", "blocked": []})]) == ""


def test_the_journal_text_shows_setup_and_network_events() -> None:
    started = event_lines("setup", 0, {"index": 0, "source": "request", "command": "make deps",
                                      "status": "started"})
    failed = event_lines("setup", 0, {"index": 0, "source": "request", "status": "failed",
                                     "exit_code": 2, "stderr": "no rule"})
    network = event_lines("network", 0, {"phase": "setup", "bytes_to_sandbox": 10, "blocked": [
        {"method": "CONNECT", "host": "evil.org", "port": 443, "reason": "r", "command": "c"}]})
    assert started == ["[  0] setup 1 (request): $ make deps"]
    assert failed[0] == "[  0] setup 1 (request): failed, exit 2" and "no rule" in failed[-1]
    assert "refused CONNECT evil.org:443" in network[1]


def test_the_setup_settings_reach_an_executor_pod(tmp_path: Path) -> None:
    settings = studio_settings(tmp_path, setup_allowlist="10.1.2.3:3141,.corp.example",
                               setup_timeout_s=60)
    forwarded = forwarded_environment(settings)
    assert forwarded["STUDIO_SETUP_ALLOWLIST"] == "10.1.2.3:3141,.corp.example"
    assert forwarded["STUDIO_SETUP_TIMEOUT_S"] == "60.0"
