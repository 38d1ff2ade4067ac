"""The Redactor on its own: configured values, token shapes, secret-named keys."""

from __future__ import annotations

import base64
import random
from enum import StrEnum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import SecretStr

from services.db.redaction import _PATTERNS, _SECRET_KEY, _SHORTEST_MATCH, REDACTED, Redactor
from services.settings import StudioSettings


def test_configured_values_and_their_basic_auth_form() -> None:
    redactor = Redactor(["plain-opaque-value-42"])
    basic = base64.b64encode(b"x-access-token:plain-opaque-value-42").decode()
    assert redactor.text("a plain-opaque-value-42 b") == f"a {REDACTED} b"
    assert basic not in redactor.text(f"header {basic}")


def test_token_shapes_and_headers() -> None:
    redactor = Redactor()
    cases = {
        "ghp_" + "a" * 36: REDACTED,
        "github_pat_" + "B" * 30: REDACTED,
        "sk-" + "c" * 40: REDACTED,
        "Authorization: Basic eC1hY2Nlc3MtdG9rZW46c2VjcmV0": f"Authorization: {REDACTED}",
        "Bearer abcdefghijklmnop": f"Bearer {REDACTED}",
        "https://user:pa55word@example.test/r.git": f"https://user:{REDACTED}@example.test/r.git",
    }
    for text, expected in cases.items():
        assert redactor.text(text) == expected
    assert redactor.text("nothing secret here") == "nothing secret here"


def test_nested_data_and_secret_named_keys() -> None:
    data = {"env": {"GITHUB_TOKEN": "opaque", "PATH": "/bin"}, "usage": {"input_tokens": 3},
            "list": ["x", {"api_key": "k"}]}
    assert Redactor().data(data) == {"env": {"GITHUB_TOKEN": REDACTED, "PATH": "/bin"},
                                     "usage": {"input_tokens": 3},
                                     "list": ["x", {"api_key": REDACTED}]}


def test_from_settings_collects_every_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "provider-key-from-env")
    settings = StudioSettings(
        github_token=SecretStr("tok-from-settings-1"), secret_key=SecretStr("key-from-settings"),
        database_url=SecretStr("postgresql://u:dbpassword99@h/db"),
    )
    redactor = Redactor.from_settings(settings, extra=["extra-secret-x"])
    text = "tok-from-settings-1 key-from-settings dbpassword99 extra-secret-x provider-key-from-env"
    assert redactor.text(text) == " ".join([REDACTED] * 5)
    assert Redactor(["short"]).text("short") == "short"  # too short to be a secret


def _every_pattern_in_turn(text: str) -> str:
    """What ``Redactor().text`` answered before its one-search shortcut: each token-shape
    pattern applied in order."""
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def test_the_one_search_shortcut_redacts_exactly_as_every_pattern_in_turn() -> None:
    """Strings made of fragments near and inside each token shape (prefixes, lengths at the
    bounds, case, separators) come out as the patterns applied one after the other make them."""
    fragments = [
        "ghp_", "gho_", "ghx_", "a" * 15, "A" * 16, "github_pat_", "_", "sk-", "AIza", "Z" * 30,
        "xoxb-", "xoxq-", "0" * 10, "Authorization", "AUTHORIZATION :", "authorization=", "bearer ",
        "BEARER\t", "12345678", "://", "https://user:", "user", ":", "pa55", "@", "/", " ", "\n",
        "'", '"', "é", "-", ".", "x",
    ]
    rng = random.Random(35)
    redactor = Redactor()
    changed = 0
    for _ in range(20_000):
        text = "".join(rng.choice(fragments) for _ in range(rng.randint(0, 8)))
        expected = _every_pattern_in_turn(text)
        assert redactor.text(text) == expected, text
        changed += expected != text
    assert changed > 1_000  # positive control: many of the strings did hold a token shape


def test_no_token_shape_fits_in_fewer_characters_than_the_shortcut_skips() -> None:
    """Strings shorter than ``_SHORTEST_MATCH`` are not searched: every string of up to that
    many characters over the characters the patterns care about is left as the patterns in
    turn leave it, and one of exactly that length is changed (the bound is tight)."""
    alphabet = ":/@ab"
    texts = [""]
    for _ in range(_SHORTEST_MATCH - 1):
        texts += [t + c for t in texts if len(t) == len(texts[-1]) for c in alphabet]
    assert all(_every_pattern_in_turn(t) == t for t in texts)
    assert _every_pattern_in_turn("://a:b@") != "://a:b@"
    assert len("://a:b@") == _SHORTEST_MATCH


class _Kind(StrEnum):
    TOKEN = "ghp_" + "k" * 20


def _old_data(redactor: Redactor, value: Any) -> Any:
    """``Redactor.data`` before its exact-type dispatch and remembered key verdicts."""
    if isinstance(value, str):
        return redactor.text(value)
    if isinstance(value, dict):
        return {key: REDACTED
                if isinstance(item, str) and isinstance(key, str) and _SECRET_KEY.match(key)
                else _old_data(redactor, item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_old_data(redactor, item) for item in value]
    return value


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
    st.sampled_from(["x", "ghp_" + "a" * 20, "Bearer abcdefghijk", "https://u:pw1234@h/r",
                     "plain-opaque-value-42", _Kind.TOKEN, "short"]))
_KEYS = st.one_of(st.sampled_from(["api_key", "GITHUB_TOKEN", "path", "password", "x-token",
                                   "tokens", "argv"]), st.integers(min_value=0, max_value=3))
_DATA = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(_KEYS, inner, max_size=4)), max_leaves=20)


@settings(max_examples=500, deadline=None)
@given(value=_DATA)
def test_data_redacts_as_the_walk_it_replaced(value: Any) -> None:
    redactor = Redactor(["plain-opaque-value-42"])
    expected = _old_data(redactor, value)
    assert redactor.data(value) == expected
    assert redactor.data(value) == expected  # with the key verdicts remembered
