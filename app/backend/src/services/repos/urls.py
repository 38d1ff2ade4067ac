"""Validation of the repository URLs an execution clones, and what is derived from them.

The rules (SPEC section 4), checked before any git process sees the value:

* ``https://host[:port]/path`` always; ``http://`` only to a loopback host (``localhost``,
  ``127.0.0.0/8``, ``::1``);
* never a remote-helper form ``<transport>::<address>`` (``ext::sh -c ...``), ``file://``,
  ``ssh://``, ``git://``, the scp-like ``host:path`` form, or any other scheme;
* never a value git could read as an option (a leading ``-``), whitespace or control characters,
  credentials in the URL (``user:pass@``), a query or a fragment;
* a local filesystem path only from the CLI (``from_api=False``): an existing directory, returned
  as an absolute path.

A refusal raises :class:`RepositoryUrlRejected` (code ``invalid_arguments``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from services.execution.errors import ErrorCode, ExecutionError

_TRANSPORT_FORM = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+.-]*::")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_OWNER_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
MAX_URL_LENGTH = 2048


class RepositoryUrlRejected(ExecutionError):
    """A repository URL that the harness refuses to hand to git."""

    default_code = ErrorCode.INVALID_ARGUMENTS


@dataclass(frozen=True)
class ValidatedRepo:
    """A repository location that passed :func:`validate_repo_url`.

    ``url`` is what git is given; ``origin`` is ``scheme://host[:port]`` (``None`` for a local
    path); ``cache_key`` identifies the repository whatever its spelling (case of the host, a
    trailing ``/`` or ``.git``).
    """

    url: str
    origin: str | None
    local: bool
    cache_key: str

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.cache_key.encode()).hexdigest()[:32]


def _reject(message: str, url: str) -> RepositoryUrlRejected:
    shown = url if len(url) <= 200 else url[:200] + "..."
    return RepositoryUrlRejected(message, details={"field": "repo_url", "url": _mask(shown)})


def _mask(url: str) -> str:
    """The URL with any userinfo hidden (it could be a token)."""
    return re.sub(r"(?i)^([a-z][a-z0-9+.-]*://)[^/@]*@", r"\1[REDACTED]@", url)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets) is this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_origin(url: str) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, normalized (lowercase, default port omitted);
    ``None`` when ``url`` is not http(s) or has no host."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:
        try:  # one spelling per IPv6 address (``[::1]`` and ``[0:0::1]`` are one origin)
            host = f"[{ipaddress.IPv6Address(host).compressed}]"
        except ValueError:
            return None
    default = 443 if scheme == "https" else 80
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != default else "")


def _check_characters(url: str) -> None:
    if not url:
        raise _reject("the repository URL is empty", url)
    if len(url) > MAX_URL_LENGTH:
        raise _reject("the repository URL is too long", url)
    if any(ch.isspace() or ord(ch) < 0x20 or ord(ch) == 0x7F for ch in url):
        raise _reject("the repository URL contains whitespace or control characters", url)
    if url.startswith("-"):
        raise _reject("the repository URL must not start with '-'", url)
    if _TRANSPORT_FORM.match(url):
        raise _reject("remote-helper transports (<transport>::address) are refused", url)


def _validate_network(url: str, scheme: str) -> ValidatedRepo:
    if scheme not in ("https", "http"):
        raise _reject(f"the {scheme}:// transport is refused (use https)", url)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on an invalid port
    except ValueError as exc:
        raise _reject(f"the repository URL is malformed: {exc}", url) from None
    if "@" in parts.netloc:
        raise _reject("credentials in the repository URL are refused; configure a token", url)
    if not parts.hostname:
        raise _reject("the repository URL has no host", url)
    if scheme == "http" and not is_loopback(parts.hostname):
        raise _reject("plain http is only allowed to a loopback host (use https)", url)
    if parts.query or parts.fragment or "?" in url or "#" in url:
        raise _reject("the repository URL must not carry a query or a fragment", url)
    if parts.path.strip("/") == "":
        raise _reject("the repository URL has no repository path", url)
    origin = url_origin(url)
    assert origin is not None  # scheme and host were checked above
    path = parts.path.rstrip("/").removesuffix(".git")
    return ValidatedRepo(url=url, origin=origin, local=False, cache_key=f"{origin}{path}")


def _validate_local(url: str) -> ValidatedRepo:
    head = url.split("/", 1)[0]
    if ":" in head:
        raise _reject("scp-like host:path (ssh) remotes are refused (use https)", url)
    path = Path(url).expanduser().resolve()
    if not path.is_dir():
        raise _reject("the local repository path is not a directory", url)
    return ValidatedRepo(url=str(path), origin=None, local=True, cache_key=f"local:{path}")


def validate_repo_url(url: str, *, from_api: bool) -> ValidatedRepo:
    """``url`` if the harness may clone it, else :class:`RepositoryUrlRejected`."""
    _check_characters(url)
    scheme = _SCHEME.match(url)
    if scheme is not None:
        return _validate_network(url, scheme.group(1).lower())
    if from_api:
        raise _reject("a repository URL must be https:// (local paths only from the CLI)", url)
    return _validate_local(url)


def github_repo_from_url(url: str, override: str | None = None) -> tuple[str, str]:
    """``(owner, name)`` of the GitHub repository: ``override`` (``OWNER/NAME``) when given, else
    the last two path segments of ``url`` with ``.git`` stripped."""
    if override is not None:
        if not _OWNER_REPO.match(override):
            raise RepositoryUrlRejected("the GitHub repository must be given as OWNER/NAME",
                                        details={"field": "github_repo", "value": override})
        owner, name = override.split("/")
        return owner, name.removesuffix(".git")
    path = urlsplit(url).path if _SCHEME.match(url) else url
    segments = [s for s in path.rstrip("/").split("/") if s]
    if len(segments) < 2:
        raise RepositoryUrlRejected(
            "cannot tell the GitHub repository from the URL; pass --github-repo OWNER/NAME",
            details={"field": "repo_url", "url": _mask(url)})
    owner, name = segments[-2], segments[-1].removesuffix(".git")
    if not _OWNER_REPO.match(f"{owner}/{name}"):
        raise RepositoryUrlRejected("the URL does not end in OWNER/NAME",
                                    details={"field": "repo_url", "url": _mask(url)})
    return owner, name
