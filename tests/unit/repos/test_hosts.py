"""Repository hosts that are (or resolve to) internal addresses are refused with
``host_not_allowed``: when the execution is created and again right before git connects.

Name resolution is the network edge here: a table stands for DNS (``RESOLVED``), except for
``localhost``, which the machine's own resolver answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from services.execution.errors import ConfigError, ErrorCode, ToolFailure
from services.repos.access import repository_access
from services.repos.hosts import HostPolicy, RepositoryHostRefused, literal_address, resolve
from services.repos.origins import GitOrigins
from services.repos.urls import validate_repo_url
from services.settings import StudioSettings

RESOLVED = {
    "internal.example": ["10.1.2.3"],
    "public.example": ["140.82.112.3"],
    "mixed.example": ["140.82.112.3", "169.254.169.254"],
    "v6private.example": ["fd12::1"],
    "localhost": ["127.0.0.1", "::1"],
}

REFUSED = [
    ("https://169.254.169.254/latest/meta-data.git", "link_local"),
    ("https://10.0.0.1/acme/widgets.git", "private"),
    ("https://192.168.1.1/acme/widgets.git", "private"),
    ("https://172.16.0.1/acme/widgets.git", "private"),
    ("https://100.64.0.1/acme/widgets.git", "private"),            # shared (carrier NAT)
    ("https://0.0.0.0/acme/widgets.git", "private"),
    ("https://224.0.0.1/acme/widgets.git", "multicast"),
    ("https://[::ffff:a9fe:a9fe]/acme/widgets.git", "link_local"),  # IPv4-mapped
    ("https://[::ffff:10.0.0.1]/acme/widgets.git", "private"),
    ("https://[64:ff9b::a9fe:a9fe]/acme/widgets.git", "link_local"),  # NAT64
    ("https://[2002:a9fe:a9fe::1]/acme/widgets.git", "link_local"),  # 6to4
    ("https://[fd00:ec2::254]/acme/widgets.git", "private"),        # AWS metadata over IPv6
    ("https://[fe80::1]/acme/widgets.git", "link_local"),
    ("https://[::1]/acme/widgets.git", "loopback"),
    ("https://127.0.0.1/acme/widgets.git", "loopback"),
    ("https://2852039166/acme/widgets.git", "link_local"),          # decimal 169.254.169.254
    ("https://0xa9fea9fe/acme/widgets.git", "link_local"),          # hexadecimal
    ("https://0251.0376.0251.0376/acme/widgets.git", "link_local"),  # octal
    ("https://169.254.43518/acme/widgets.git", "link_local"),       # a.b.c with c 16 bits
    ("https://0x7f.1/acme/widgets.git", "loopback"),
    ("https://127.1/acme/widgets.git", "loopback"),
    ("https://metadata.google.internal/computeMetadata/v1.git", "metadata"),
    ("https://METADATA.google.internal./x/y.git", "metadata"),
    ("https://internal.example/acme/widgets.git", "private"),       # a name resolving inside
    ("https://mixed.example/acme/widgets.git", "link_local"),       # one address is enough
    ("https://v6private.example/acme/widgets.git", "private"),
    ("https://localhost/acme/widgets.git", "loopback"),
]
ALLOWED = [
    "https://public.example/acme/widgets.git",
    "https://140.82.112.3/acme/widgets.git",
    "https://[2606:50c0:8000::153]/acme/widgets.git",
]


def table(host: str) -> list[str]:
    return RESOLVED.get(host.lower(), [])


def api_policy(*allowed: str) -> HostPolicy:
    settings = StudioSettings(repo_allowed_hosts=list(allowed))
    return HostPolicy.from_settings(settings, allow_loopback=False, resolver=table)


@pytest.mark.parametrize(("url", "kind"), REFUSED)
def test_internal_hosts_are_refused_at_validation_and_at_connection(url: str, kind: str) -> None:
    validate_repo_url(url, from_api=True)  # the URL itself is well-formed: the host decides
    with pytest.raises(RepositoryHostRefused) as at_validation:
        api_policy().check(url)
    assert at_validation.value.code is ErrorCode.HOST_NOT_ALLOWED
    assert at_validation.value.details["kind"] == kind
    assert "STUDIO_REPO_ALLOWED_HOSTS" in at_validation.value.message
    with pytest.raises(ToolFailure) as at_connection:
        api_policy().check_connect(url)
    assert at_connection.value.code is ErrorCode.HOST_NOT_ALLOWED


@pytest.mark.parametrize("url", ALLOWED)
def test_public_hosts_pass(url: str) -> None:
    api_policy().check(url)
    api_policy().check_connect(url)


def test_the_allowlist_admits_names_addresses_and_networks_only() -> None:
    policy = api_policy("10.0.0.0/8", "internal.example", "127.0.0.1", "fd12::/16")
    for url in ("https://10.9.9.9/a/b.git", "https://internal.example/a/b.git",
                "https://127.0.0.1/a/b.git", "https://v6private.example/a/b.git",
                "https://[::ffff:10.0.0.1]/a/b.git"):
        policy.check(url)
    for url in ("https://169.254.169.254/a/b.git", "https://192.168.1.1/a/b.git",
                "https://[::1]/a/b.git", "https://metadata.google.internal/a/b.git"):
        with pytest.raises(RepositoryHostRefused):
            policy.check(url)


def test_loopback_is_allowed_from_the_cli_and_nothing_else_inside() -> None:
    cli = HostPolicy.from_settings(StudioSettings(), allow_loopback=True, resolver=table)
    for url in ("http://127.0.0.1:8080/a/b.git", "http://localhost:8080/a/b.git",
                "http://[::1]:8080/a/b.git"):
        cli.check(url)
    for url in ("https://10.0.0.1/a/b.git", "https://169.254.169.254/a/b.git"):
        with pytest.raises(RepositoryHostRefused):
            cli.check(url)


def test_the_machines_resolver_answers_localhost_as_loopback() -> None:
    assert "127.0.0.1" in resolve("localhost") or "::1" in resolve("localhost")
    policy = HostPolicy.from_settings(StudioSettings(), allow_loopback=False)
    with pytest.raises(RepositoryHostRefused):
        policy.check("https://localhost/acme/widgets.git")


def test_a_name_that_changes_its_answer_is_refused_at_connection_time() -> None:
    answers = {"rebind.example": ["140.82.112.3"]}
    policy = HostPolicy(resolver=lambda host: answers.get(host, []))
    url = "https://rebind.example/acme/widgets.git"
    auth = repository_access(StudioSettings(), GitOrigins(frozenset(), "api_url"), None,
                             repo=validate_repo_url(url, from_api=True), pull_request=False,
                             allow_local=False, resolver=policy.resolver)
    assert auth.environment(url) == {"GIT_CONFIG_COUNT": "1",
                                     "GIT_CONFIG_KEY_0": "http.curloptResolve",
                                     "GIT_CONFIG_VALUE_0": "rebind.example:443:140.82.112.3"}
    answers["rebind.example"] = ["169.254.169.254"]
    with pytest.raises(ToolFailure) as caught:
        auth.environment(url)
    assert caught.value.code is ErrorCode.HOST_NOT_ALLOWED
    assert caught.value.details["address"] == "169.254.169.254"


def test_git_is_pinned_to_the_addresses_checked() -> None:
    policy = HostPolicy(resolver=lambda host: {"dual.example": [
        "140.82.112.3", "2606:50c0:8000::153", "140.82.112.3"]}.get(host, []))
    assert policy.check_connect("https://dual.example/a/b.git") == \
        "dual.example:443:140.82.112.3,[2606:50c0:8000::153]"
    assert policy.check_connect("http://dual.example:8080/a/b.git") == \
        "dual.example:8080:140.82.112.3,[2606:50c0:8000::153]"
    assert policy.check_connect("https://140.82.112.3/a/b.git") is None  # nothing to resolve
    with pytest.raises(ToolFailure) as caught:
        policy.check_connect("https://nowhere.example/a/b.git")
    assert caught.value.code is ErrorCode.GIT_ERROR
    policy.check("https://nowhere.example/a/b.git")  # at creation: nothing to reach


def test_local_paths_have_no_host_to_check(tmp_path: Path) -> None:
    api_policy().check(str(tmp_path))


@pytest.mark.parametrize("entry", ["10.0.0.0/33", "https://x.example", "a b", "::g/64"])
def test_a_bad_allowlist_entry_is_a_config_error(entry: str) -> None:
    with pytest.raises(ConfigError):
        HostPolicy.from_settings(StudioSettings(repo_allowed_hosts=[entry]),
                                 allow_loopback=False)


def test_numeric_spellings_are_read_as_addresses() -> None:
    assert str(literal_address("2852039166")) == "169.254.169.254"
    assert str(literal_address("0x7f000001")) == "127.0.0.1"
    assert literal_address("github.com") is None
    assert literal_address("1.2.3.4.5") is None


def test_the_setting_is_read_comma_separated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_REPO_ALLOWED_HOSTS", "10.0.0.0/8, git.internal")
    monkeypatch.setenv("STUDIO_GITHUB_GIT_ORIGINS", "https://ghe.example, http://127.0.0.1:1")
    settings = StudioSettings(github_token=SecretStr("t"))
    assert settings.repo_allowed_hosts == ["10.0.0.0/8", "git.internal"]
    assert settings.github_git_origins == ["https://ghe.example", "http://127.0.0.1:1"]
