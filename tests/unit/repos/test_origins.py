"""Which URLs get the integration's token: a table over origins (scheme, host case, default
ports, userinfo, IPv6 literals, trailing dots, paths)."""

from __future__ import annotations

import base64
import ipaddress

import pytest

from services.execution.errors import ConfigError, ErrorCode, ExecutionError
from services.repos.hosts import HostPolicy
from services.repos.origins import (
    GitOrigins,
    IntegrationGitAuth,
    credential_origin,
    derived_origins,
    parse_origin,
)

TOKEN = "ghs_OriginTableToken0123456789abcdef"
ORIGINS = GitOrigins(frozenset({"https://github.com", "http://127.0.0.1:8080",
                                "http://[::1]:9000"}), "environment")

GETS_TOKEN = [
    "https://github.com/acme/widgets.git",
    "https://github.com/acme/widgets",
    "https://github.com",
    "HTTPS://GitHub.COM/acme/widgets.git",
    "https://github.com:443/acme/widgets.git",
    "http://127.0.0.1:8080/acme/widgets.git",
    "http://[::1]:9000/acme/widgets.git",
    "http://[0:0:0:0:0:0:0:1]:9000/acme/widgets.git",
]
NO_TOKEN = [
    "http://github.com/acme/widgets.git",            # scheme
    "https://github.com:8443/acme/widgets.git",      # port
    "https://user@github.com/acme/widgets.git",      # userinfo
    "https://x-access-token:t@github.com/a/b.git",   # userinfo with a password
    "https://github.com@evil.example/a/b.git",       # the host is evil.example
    "https://github.com./acme/widgets.git",          # trailing dot: another name to TLS and git
    "https://github.com.evil.example/acme/w.git",    # suffix
    "https://evil.example/github.com/acme/w.git",    # the origin in the path
    "https://evil.example/https://github.com/a/b",   # the origin in the path
    "http://127.0.0.1/acme/widgets.git",             # default port 80, not 8080
    "http://127.0.0.1:80/acme/widgets.git",
    "http://localhost:8080/acme/widgets.git",        # another name for the same machine
    "http://127.0.0.2:8080/acme/widgets.git",
    "http://[::1]:9001/acme/widgets.git",
    "http://[::2]:9000/acme/widgets.git",
    "http://[fe80::1%25eth0]:9000/a/b.git",          # zone id
    "http://127.0.0.1:8080x/a/b.git",                # malformed port
    "ssh://github.com/acme/widgets.git",
    "git://github.com/acme/widgets.git",
    "file:///github.com/acme/widgets.git",
    "github.com:acme/widgets.git",
    "/srv/github.com/acme/widgets",
    "",
]


@pytest.mark.parametrize("url", GETS_TOKEN)
def test_urls_on_the_integrations_origins_get_the_token(url: str) -> None:
    assert ORIGINS.allows(url)
    env = _auth().environment(url)
    header = base64.b64encode(f"x-access-token:{TOKEN}".encode()).decode()
    assert env["GIT_CONFIG_VALUE_0"] == f"Authorization: Basic {header}"
    assert (env["GIT_CONFIG_KEY_1"], env["GIT_CONFIG_VALUE_1"]) == ("http.followRedirects",
                                                                    "false")


@pytest.mark.parametrize("url", NO_TOKEN)
def test_every_other_url_gets_no_credential(url: str) -> None:
    assert not ORIGINS.allows(url)
    env = _auth().environment(url)
    assert [v for v in env.values() if "Authorization" in v or TOKEN in v] == []


def _auth() -> IntegrationGitAuth:
    everything = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    hosts = HostPolicy(allowed_networks=everything, resolver=lambda host: ["140.82.112.3"])
    return IntegrationGitAuth(ORIGINS, hosts, TOKEN)


@pytest.mark.parametrize(("url", "origin"), [
    ("HTTPS://GitHub.com:443/a", "https://github.com"),
    ("http://Example.COM:80/", "http://example.com"),
    ("http://example.com:8080", "http://example.com:8080"),
    ("https://[0:0::1]:443/x", "https://[::1]"),
    ("https://[::FFFF:1.2.3.4]/x", "https://[::ffff:102:304]"),
])
def test_origins_are_normalized(url: str, origin: str) -> None:
    assert credential_origin(url) == origin


@pytest.mark.parametrize(("api_url", "origins"), [
    ("https://api.github.com", {"https://github.com"}),
    ("https://api.github.com/", {"https://github.com"}),
    ("https://API.GitHub.com:443", {"https://github.com"}),
    ("https://ghe.example.com/api/v3", {"https://ghe.example.com"}),
    ("https://ghe.example.com/api/v3/", {"https://ghe.example.com"}),
    ("http://127.0.0.1:5000/api/v3", {"http://127.0.0.1:5000"}),
    ("https://api.github.com.evil.example", set()),
    ("https://example.com/github", set()),
    ("https://example.com/api/v3/extra", set()),
    ("http://api.github.com", set()),
    ("ftp://api.github.com", set()),
])
def test_origins_derived_from_the_api_url(api_url: str, origins: set[str]) -> None:
    assert derived_origins(api_url) == origins


@pytest.mark.parametrize("value", [
    "https://github.com/acme", "github.com", "https://u@github.com", "https://github.com?x=1",
    "ssh://github.com", "https://", "https://github.com:99999",
])
def test_a_configured_origin_is_scheme_host_port_only(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_origin(value)
    assert caught.value.code is ErrorCode.CONFIG_ERROR


def test_explicit_origins_win_over_stored_ones_which_win_over_the_api_url() -> None:
    api = "https://api.github.com"
    assert GitOrigins.resolve(["https://GHE.example/"], ["https://stored.example"], api) == \
        GitOrigins(frozenset({"https://ghe.example"}), "environment")
    assert GitOrigins.resolve([], ["https://stored.example"], api) == \
        GitOrigins(frozenset({"https://stored.example"}), "database")
    assert GitOrigins.resolve([], [], api) == \
        GitOrigins(frozenset({"https://github.com"}), "api_url")


def test_the_refusal_names_the_origin_and_the_setting() -> None:
    error = ORIGINS.refusal("https://evil.example:8443/a/b.git", "a pull request")
    assert isinstance(error, ExecutionError)
    assert error.code is ErrorCode.INTEGRATION_UNAVAILABLE and not error.retryable
    assert "https://evil.example:8443" in error.message
    assert "STUDIO_GITHUB_GIT_ORIGINS" in error.message
    assert error.details["origin"] == "https://evil.example:8443"
