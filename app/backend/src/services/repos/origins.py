"""Where the GitHub integration's token may go: the integration's own git origins, nowhere else.

The token belongs to the integration, not to a repository URL (which whoever creates an
execution chooses). The origins (``scheme://host[:port]``) it may be sent to, first found wins:

1. ``STUDIO_GITHUB_GIT_ORIGINS`` (comma-separated);
2. the origins stored with the integration (``studio integrations set github --git-origins``);
3. derived from the API URL: ``https://api.github.com`` gives ``https://github.com``, a GitHub
   Enterprise ``https://HOST/api/v3`` gives ``https://HOST``; any other API URL gives none.

Two URLs have the same origin when scheme, host and port agree after normalization: scheme and
host lowercase, the default port (443, 80) dropped, an IPv6 literal in its compressed form. A
URL with userinfo, a zone id, a trailing dot on the host (``github.com.``: another name to TLS and
to git's own URL matching) or any scheme but http(s) matches no origin.

A repository on another origin gets no credential: it is cloned and fetched anonymously, a push
goes without one (a host that wants one answers 401: ``auth_failed``), and an execution that asks
for a pull request on it is refused before any network access (``integration_unavailable``,
naming the origin and the setting). :class:`IntegrationGitAuth` is the ``ports.GitAuth`` every
git network operation of an execution asks (the harness's clone, fetch and push, the mirror
cache, the finalizer, a resumed execution's re-clone, the git domain's ``push``/``fetch``); it
re-checks the host (:mod:`services.repos.hosts`) each time and pins git to the addresses checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from services.execution.errors import ConfigError, ErrorCode, ExecutionError
from services.repos.credentials import TokenGitAuth
from services.repos.hosts import HostPolicy
from services.repos.urls import url_origin

SETTING = "STUDIO_GITHUB_GIT_ORIGINS"
GITHUB_API = "https://api.github.com"
GITHUB_GIT = "https://github.com"
ENTERPRISE_API_PATH = "/api/v3"


def credential_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, normalized; ``None`` when the URL cannot be
    an integration origin (another scheme, no host, userinfo, a zone id, a malformed port)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if "@" in parts.netloc or "%" in (parts.hostname or ""):
        return None
    return url_origin(url)


def parse_origin(value: str, source: str = SETTING) -> str:
    """One configured origin: ``scheme://host[:port]`` (a trailing ``/`` tolerated), normalized."""
    text = value.strip()
    origin = credential_origin(text)
    try:
        path = urlsplit(text).path
    except ValueError:
        path = "?"
    if origin is None or path not in ("", "/") or "?" in text or "#" in text:
        raise ConfigError(f"{source}: {value!r} is not an http(s) scheme://host[:port] origin",
                          details={"setting": source, "value": value[:200]})
    return origin


def derived_origins(api_url: str) -> frozenset[str]:
    """The git origins an API URL implies (see the module docstring)."""
    origin = credential_origin(api_url)
    if origin is None:
        return frozenset()
    path = urlsplit(api_url).path.rstrip("/")
    if origin == GITHUB_API and path == "":
        return frozenset({GITHUB_GIT})
    if path == ENTERPRISE_API_PATH:
        return frozenset({origin})
    return frozenset()


@dataclass(frozen=True)
class GitOrigins:
    """The integration's git origins and where they came from (``environment``, ``database``,
    ``api_url``)."""

    origins: frozenset[str]
    source: str

    @classmethod
    def resolve(cls, explicit: Iterable[str], stored: Iterable[str],
                api_url: str) -> GitOrigins:
        explicit, stored = list(explicit), list(stored)
        if explicit:
            return cls(frozenset(parse_origin(o) for o in explicit), "environment")
        if stored:
            return cls(frozenset(parse_origin(o, "the stored git origins") for o in stored),
                       "database")
        return cls(derived_origins(api_url), "api_url")

    def allows(self, url: str) -> bool:
        origin = credential_origin(url)
        return origin is not None and origin in self.origins

    def refusal(self, url: str, needs: str) -> ExecutionError:
        """The ``integration_unavailable`` error of a repository outside these origins."""
        origin = credential_origin(url) or url[:200]
        listed = ", ".join(sorted(self.origins)) or "none"
        return ExecutionError(
            f"the repository's origin {origin} is not one of the GitHub integration's git "
            f"origins ({listed}); {needs} needs the integration's credential. Add the origin to "
            f"{SETTING} (or `studio integrations set github --git-origins`) if it belongs to the "
            "integration", code=ErrorCode.INTEGRATION_UNAVAILABLE,
            details={"origin": origin, "git_origins": sorted(self.origins),
                     "git_origins_source": self.source, "setting": SETTING})


@dataclass(frozen=True)
class IntegrationGitAuth:
    """``ports.GitAuth`` of one execution: the host re-checked before every git network
    operation, the token only for the integration's origins (``{}`` everywhere else)."""

    origins: GitOrigins
    hosts: HostPolicy
    token: str | None = field(default=None, repr=False)

    def environment(self, remote_url: str) -> Mapping[str, str]:
        pin = self.hosts.check_connect(remote_url)
        pairs = [("http.curloptResolve", pin)] if pin is not None else []
        origin = credential_origin(remote_url)
        if self.token is not None and origin is not None and origin in self.origins.origins:
            # The header is scoped to the URL's origin as written: git matches
            # ``http.<url>.*`` against the URL it requests, which it does not rewrite.
            written = url_origin(remote_url)
            assert written is not None  # an http(s) URL with a host, as credential_origin saw
            pairs = [*_pairs(TokenGitAuth(self.token, written).environment(remote_url)),
                     *pairs]
        return _config_env(pairs)


def _pairs(env: Mapping[str, str]) -> list[tuple[str, str]]:
    count = int(env.get("GIT_CONFIG_COUNT", "0"))
    return [(env[f"GIT_CONFIG_KEY_{n}"], env[f"GIT_CONFIG_VALUE_{n}"]) for n in range(count)]


def _config_env(pairs: list[tuple[str, str]]) -> dict[str, str]:
    """``GIT_CONFIG_COUNT``/``KEY_n``/``VALUE_n`` for ``pairs`` (``{}`` for none)."""
    if not pairs:
        return {}
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for n, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env
