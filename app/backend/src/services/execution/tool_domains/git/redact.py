"""Redaction of credentials in git output before it reaches an envelope, a log or the journal.

Two layers: the exact secrets the harness handed to git (every value of the ``GIT_CONFIG_*``
variables that carry a token, the header's credential, and the token inside a Basic
credential), and patterns that look like credentials whatever their origin (``Authorization:``
header values, userinfo in URLs, GitHub token formats).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping

REDACTED = "[REDACTED]"
_MIN_SECRET_LEN = 6
_HEADER = re.compile(r"(?i)(authorization:\s*)([A-Za-z]+\s+)?(\S+)")
_URL_USERINFO = re.compile(r"(?i)([a-z][a-z0-9+.-]*://)[^/@\s:]*:[^/@\s]*@")
_TOKEN_SHAPES = re.compile(
    r"\b(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{20,})\b"
)


def secrets_from_env(env_extra: Mapping[str, str]) -> list[str]:
    """Every secret carried by the ``GIT_CONFIG_VALUE_*`` values of ``env_extra``, longest first."""
    found: set[str] = set()
    for key, value in env_extra.items():
        if key.startswith("GIT_CONFIG_VALUE_"):
            found.update(_secrets_in_value(value))
    return sorted((s for s in found if len(s) >= _MIN_SECRET_LEN), key=len, reverse=True)


def _secrets_in_value(value: str) -> Iterable[str]:
    match = _HEADER.search(value)
    if match is None:
        return [value] if len(value) >= 16 and " " not in value else []
    credential = match.group(3)
    found = [value[match.start(3):], credential]
    scheme = (match.group(2) or "").strip().lower()
    if scheme == "basic":
        found += _basic_parts(credential)
    return found


def _basic_parts(credential: str) -> list[str]:
    try:
        decoded = base64.b64decode(credential, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return []
    user, _, password = decoded.partition(":")
    return [decoded, password] if password else [decoded]


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets and anything credential-shaped replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    text = _HEADER.sub(lambda m: f"{m.group(1)}{m.group(2) or ''}{REDACTED}", text)
    text = _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _TOKEN_SHAPES.sub(REDACTED, text)
