""":func:`services.db.blobs.extract` on its own: the references it makes, against the walk it
replaced (the exact JSON types are dispatched first; subclasses and tuples as before)."""

from __future__ import annotations

import hashlib
from enum import StrEnum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from services.db.blobs import BLOB_KEY, LITERAL_KEY, MIN_BLOB_BYTES, extract


def _old_replace(value: Any, found: dict[str, bytes]) -> Any:
    """``extract``'s walk before the exact-type dispatch."""
    if isinstance(value, str):
        if len(value) * 4 < MIN_BLOB_BYTES:
            return value
        raw = value.encode("utf-8", "surrogatepass")
        if len(raw) < MIN_BLOB_BYTES:
            return value
        digest = hashlib.sha256(raw).hexdigest()
        found[digest] = raw
        return {BLOB_KEY: digest, "size": len(raw)}
    if isinstance(value, dict):
        replaced = {key: _old_replace(item, found) for key, item in value.items()}
        return {LITERAL_KEY: replaced} if BLOB_KEY in value or LITERAL_KEY in value else replaced
    if isinstance(value, list | tuple):
        return [_old_replace(item, found) for item in value]
    return value


class _Big(StrEnum):
    TEXT = "e" * MIN_BLOB_BYTES


_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=5),
    st.sampled_from(["a" * (MIN_BLOB_BYTES - 1), "a" * MIN_BLOB_BYTES, "é" * (MIN_BLOB_BYTES // 2),
                     "é" * (MIN_BLOB_BYTES // 2 - 1), "😀" * (MIN_BLOB_BYTES // 4),
                     "\ud800" * (MIN_BLOB_BYTES // 3 + 1), _Big.TEXT]))
_DATA = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
    st.dictionaries(st.sampled_from(["a", "size", BLOB_KEY, LITERAL_KEY]), inner, max_size=3)),
    max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(value=_DATA)
def test_extract_is_the_walk_it_replaced(value: Any) -> None:
    found: dict[str, bytes] = {}
    expected: dict[str, bytes] = {}
    assert extract(value, found) == _old_replace(value, expected)
    assert found == expected


def test_a_large_string_becomes_a_reference_and_a_lookalike_is_wrapped() -> None:
    found: dict[str, bytes] = {}
    big = "é" * (MIN_BLOB_BYTES // 2)
    digest = hashlib.sha256(big.encode()).hexdigest()
    assert extract({"x": [big], BLOB_KEY: 1}, found) == {
        LITERAL_KEY: {"x": [{BLOB_KEY: digest, "size": MIN_BLOB_BYTES}], BLOB_KEY: 1}}
    assert found == {digest: big.encode()}
