"""Large strings stored once per execution: the ``content_blobs`` table.

A tool call's arguments and its output travel through several records (the model's response, the
``tool_call`` and ``tool_result`` events, the ``tool_calls`` evidence row, the replay script of the
request), and a file the agent writes is often written again with a small change. Storing each
string everywhere it appears made storage grow with the square of the work. Instead, before a JSON
document is stored, every string of :data:`MIN_BLOB_BYTES` or more (UTF-8) is replaced by a
reference ``{"$blob": "<sha256>", "size": <bytes>}`` and the string itself is stored once per
execution, keyed by its SHA-256 and compressed with zlib; reading the document back
(:func:`hydrate`) puts the strings back, so every reader sees exactly what was written.

A stored dictionary that happens to have a ``$blob`` or ``$literal`` key is wrapped as
``{"$literal": {...}}`` so it is never taken for a reference. Blobs belong to their execution (a
foreign key with ``ON DELETE CASCADE``): deleting an execution deletes them, and no execution reads
another's. The text is redacted before it gets here, as everything else the journal stores.
"""

from __future__ import annotations

import hashlib
import logging
import zlib
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from services.db.models import ContentBlob
from services.db.session import dialect_insert

log = logging.getLogger(__name__)

MIN_BLOB_BYTES = 4096
BLOB_KEY = "$blob"
LITERAL_KEY = "$literal"
COMPRESSION_LEVEL = 6
_SELECT_CHUNK = 500


def externalize(session: Session | Connection, execution_id: str, value: Any, *,
                known: set[str] | None = None) -> Any:
    """``value`` with its large strings replaced by references, the strings stored (once) in
    ``session``'s transaction. ``known``: the digests already stored in this transaction (by
    default remembered in a session's ``info``; a Core connection outlives its transaction, so
    its caller passes the set)."""
    found: dict[str, bytes] = {}
    stored = extract(value, found)
    if found:
        _store(session, execution_id, found, known)
    return stored


def extract(value: Any, found: dict[str, bytes]) -> Any:
    """``value`` with its large strings replaced by references; the strings (UTF-8) are added
    to ``found`` by digest, for the caller to store (:func:`compress`)."""
    return _replace(value, found)


def compress(raw: bytes) -> bytes:
    return zlib.compress(raw, COMPRESSION_LEVEL)


def hydrate(session: Session | Connection, execution_id: str, values: list[Any]) -> list[Any]:
    """``values`` as they were before :func:`externalize` (one query for all their blobs)."""
    digests: set[str] = set()
    for value in values:
        _collect(value, digests)
    texts: dict[str, str] = {}
    ordered = sorted(digests)
    for start in range(0, len(ordered), _SELECT_CHUNK):
        chunk = ordered[start:start + _SELECT_CHUNK]
        rows = session.execute(select(ContentBlob.digest, ContentBlob.data).where(
            ContentBlob.execution_id == execution_id, ContentBlob.digest.in_(chunk)))
        for digest, data in rows:
            texts[digest] = zlib.decompress(bytes(data)).decode("utf-8", "surrogatepass")
    missing = digests - texts.keys()
    if missing:
        log.warning("execution %s: %d stored strings are missing", execution_id, len(missing))
    return [_restore(value, texts) for value in values]


def _replace(value: Any, found: dict[str, bytes]) -> Any:
    kind = value.__class__  # the exact JSON types first: no call for the common cases
    if kind is str:
        return value if len(value) * 4 < MIN_BLOB_BYTES else _reference(value, found)
    if kind is dict:
        return _replace_mapping(value, found)
    if kind is list:
        return [_replace(item, found) for item in value]
    if kind in _SCALARS:
        return value
    if isinstance(value, str):
        return value if len(value) * 4 < MIN_BLOB_BYTES else _reference(value, found)
    if isinstance(value, dict):
        return _replace_mapping(value, found)
    if isinstance(value, list | tuple):
        return [_replace(item, found) for item in value]
    return value


_SCALARS = frozenset({int, float, bool, type(None)})


def _reference(value: str, found: dict[str, bytes]) -> Any:
    """``value``'s reference if it is large enough (its UTF-8 added to ``found``), else
    ``value`` (a string under a quarter of the threshold never is: see the callers)."""
    raw = value.encode("utf-8", "surrogatepass")
    if len(raw) < MIN_BLOB_BYTES:
        return value
    digest = hashlib.sha256(raw).hexdigest()
    found[digest] = raw
    return {BLOB_KEY: digest, "size": len(raw)}


def _replace_mapping(value: dict[Any, Any], found: dict[str, bytes]) -> dict[str, Any]:
    replaced = {key: _replace(item, found) for key, item in value.items()}
    return {LITERAL_KEY: replaced} if BLOB_KEY in value or LITERAL_KEY in value else replaced


def _is_reference(value: dict[str, Any]) -> bool:
    return set(value) == {BLOB_KEY, "size"} and isinstance(value[BLOB_KEY], str)


def _collect(value: Any, digests: set[str]) -> None:
    if isinstance(value, dict):
        if _is_reference(value):
            digests.add(value[BLOB_KEY])
            return
        inner = value[LITERAL_KEY] if set(value) == {LITERAL_KEY} else value
        for item in inner.values() if isinstance(inner, dict) else []:
            _collect(item, digests)
    elif isinstance(value, list):
        for item in value:
            _collect(item, digests)


def _restore(value: Any, texts: dict[str, str]) -> Any:
    if isinstance(value, dict):
        if _is_reference(value):
            return texts.get(value[BLOB_KEY], value)
        if set(value) == {LITERAL_KEY} and isinstance(value[LITERAL_KEY], dict):
            return {key: _restore(item, texts) for key, item in value[LITERAL_KEY].items()}
        return {key: _restore(item, texts) for key, item in value.items()}
    if isinstance(value, list):
        return [_restore(item, texts) for item in value]
    return value


def _store(session: Session | Connection, execution_id: str, found: dict[str, bytes],
           known: set[str] | None) -> None:
    if known is None:
        known = (session.info.setdefault(("studio_blobs", execution_id), set())
                 if isinstance(session, Session) else set())
    rows = [{"execution_id": execution_id, "digest": digest, "size_bytes": len(raw),
             "data": compress(raw)}
            for digest, raw in found.items() if digest not in known]
    if not rows:
        return
    session.execute(dialect_insert(session)(ContentBlob).values(rows).on_conflict_do_nothing(
        index_elements=["execution_id", "digest"]))
    known.update(digest for digest in found if digest not in known)
