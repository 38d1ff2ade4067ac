"""Redaction of secrets from everything the journal and the evidence tables store.

A :class:`Redactor` replaces with ``[redacted]``:

- every configured secret value (each ``SecretStr`` of the settings, the database password, the
  provider keys present in the environment, tokens stored in integrations), and the Basic-auth
  form ``base64("x-access-token:<token>")`` git sends;
- well-known token shapes (``ghp_...``, ``github_pat_...``, ``sk-...``, ``AIza...``, ``xox?-...``),
  the value of ``Authorization:`` headers and ``Bearer`` tokens, and passwords in URLs;
- the string value of any mapping key that names a secret (``GITHUB_TOKEN``, ``api_key``,
  ``password``, ``authorization``, ...).

Values shorter than :data:`MIN_SECRET_LENGTH` are not treated as secrets (replacing every ``a``
would destroy the record without protecting anything).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable
from typing import Any

from pydantic import SecretStr
from sqlalchemy.engine import make_url

from services.settings import StudioSettings, provider_secret_values

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 6

_PATTERNS: tuple[re.Pattern[str], ...] = (
    re.compile(r"(?i)(authorization\s*[:=]\s*)[^\r\n\"']+"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"()\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{16,}"),
    re.compile(r"()\bgithub_pat_[A-Za-z0-9_]{16,}"),
    re.compile(r"()\bsk-[A-Za-z0-9_-]{16,}"),
    re.compile(r"()\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"()\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"(://[^/\s:@]+:)[^@\s/]+(?=@)"),
)


def _scoped(pattern: re.Pattern[str]) -> str:
    """``pattern``'s expression as one branch of an alternation (its flag scoped to it)."""
    text = pattern.pattern
    return f"(?i:{text[len('(?i)'):]})" if text.startswith("(?i)") else f"(?:{text})"


# Any of :data:`_PATTERNS`: a string that none of them matches is left as it is by every one of
# them, so one search spares the eight substitutions for most strings (the journal redacts every
# string of every event).
_ANY_PATTERN = re.compile("|".join(_scoped(p) for p in _PATTERNS))
_SECRET_KEY = re.compile(
    r"(?i)^(.*[_-])?(token|secret|password|passwd|api[_-]?key|apikey|authorization|"
    r"credentials?|private[_-]?key|access[_-]?key)$"
)


def _variants(secret: str) -> list[str]:
    basic = base64.b64encode(f"x-access-token:{secret}".encode()).decode()
    return [secret, basic]


class Redactor:
    """Replaces secrets in strings and, recursively, in JSON-like data."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        for secret in secrets:
            self.add(secret)

    def add(self, secret: str | SecretStr | None) -> None:
        """Treat one more value as a secret (e.g. a token read from an integration)."""
        if isinstance(secret, SecretStr):
            secret = secret.get_secret_value()
        if not secret or len(secret) < MIN_SECRET_LENGTH:
            return
        for value in _variants(secret):
            if value not in self._secrets:
                self._secrets.append(value)
        self._secrets.sort(key=len, reverse=True)  # longest first: no partial leftovers

    @classmethod
    def from_settings(cls, settings: StudioSettings, extra: Iterable[str] = ()) -> Redactor:
        """Every ``SecretStr`` of ``settings``, the database password and the provider keys."""
        redactor = cls(extra)
        for name in type(settings).model_fields:
            value = getattr(settings, name)
            if isinstance(value, SecretStr):
                redactor.add(value)
        if settings.database_url is not None:
            password = make_url(settings.database_url.get_secret_value()).password
            redactor.add(password if isinstance(password, str) else None)
        for value in provider_secret_values():
            redactor.add(value)
        return redactor

    def text(self, value: str) -> str:
        """``value`` with every secret and secret-shaped token replaced."""
        for secret in self._secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        if len(value) < _SHORTEST_MATCH or _ANY_PATTERN.search(value) is None:
            return value
        for pattern in _PATTERNS:
            value = pattern.sub(lambda m: m.group(1) + REDACTED, value)
        return value

    def data(self, value: Any) -> Any:
        """A redacted copy of JSON-like ``value`` (dicts, lists, strings, scalars)."""
        kind = value.__class__  # the exact JSON types first: no call for the common cases
        if kind is str:
            return self.text(value)
        if kind is dict:
            return self._mapping(value)
        if kind is list:
            return [self.data(item) for item in value]
        if kind in _SCALARS:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            return [self.data(item) for item in value]
        return value

    def _mapping(self, value: dict[Any, Any]) -> dict[Any, Any]:
        return {
            key: REDACTED if isinstance(item, str) and _secret_key(key) else self.data(item)
            for key, item in value.items()
        }


_SCALARS = frozenset({int, float, bool, type(None)})
# No pattern of _PATTERNS matches fewer characters (the URL password: "://u:p" and its "@").
_SHORTEST_MATCH = 7
_KEY_VERDICTS: dict[str, bool] = {}
_KEY_VERDICTS_MAX = 4096


def _secret_key(key: Any) -> bool:
    """Whether ``key`` names a secret (:data:`_SECRET_KEY`), remembered per key."""
    if key.__class__ is str and key in _KEY_VERDICTS:
        return _KEY_VERDICTS[key]
    if not isinstance(key, str):
        return False
    verdict = _SECRET_KEY.match(key) is not None
    if key.__class__ is str and len(_KEY_VERDICTS) < _KEY_VERDICTS_MAX:
        _KEY_VERDICTS[key] = verdict
    return verdict
