"""Parsers from git's machine formats (``-z`` output) to the structured results models see."""

from __future__ import annotations

from typing import Any

LOG_FORMAT = "%H%x1f%P%x1f%an%x1f%ae%x1f%aI%x1f%s"
_KINDS = {"1": "changed", "2": "renamed", "u": "unmerged", "?": "untracked", "!": "ignored"}
_STATUS_NAMES = {"A": "added", "C": "copied", "D": "deleted", "M": "modified", "R": "renamed",
                 "T": "type_changed", "U": "unmerged", "X": "unknown"}


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class _Records:
    """The NUL-separated records of a ``-z`` output, read front to back; some records (renames)
    take the next one or two with them."""

    def __init__(self, raw: bytes) -> None:
        self._items = _decode(raw).split("\0")
        self._next = 0

    def left(self) -> int:
        return len(self._items) - self._next

    def take(self) -> str:
        item = self._items[self._next]
        self._next += 1
        return item


def parse_status(raw: bytes) -> dict[str, Any]:
    """``status --porcelain=v2 -z --branch`` as ``{branch, upstream, ahead, behind, entries}``."""
    result: dict[str, Any] = {"branch": None, "detached": False, "head": None, "upstream": None,
                              "ahead": 0, "behind": 0, "entries": []}
    records = _Records(raw)
    while records.left():
        record = records.take()
        if not record:
            continue
        if record.startswith("# "):
            _branch_header(record[2:], result)
            continue
        entry, takes_next = _status_entry(record)
        if takes_next and records.left():
            entry["orig_path"] = records.take()
        result["entries"].append(entry)
    return result


def _branch_header(header: str, result: dict[str, Any]) -> None:
    key, _, value = header.partition(" ")
    if key == "branch.oid":
        result["head"] = None if value == "(initial)" else value
    elif key == "branch.head":
        result["detached"] = value == "(detached)"
        result["branch"] = None if result["detached"] else value
    elif key == "branch.upstream":
        result["upstream"] = value
    elif key == "branch.ab":
        ahead, _, behind = value.partition(" ")
        result["ahead"] = abs(int(ahead))
        result["behind"] = abs(int(behind))


def _status_entry(record: str) -> tuple[dict[str, Any], bool]:
    tag = record[0]
    kind = _KINDS.get(tag, "unknown")
    if tag in ("?", "!"):
        return {"path": record[2:], "index": tag, "worktree": tag, "kind": kind}, False
    # Field counts before the path: 1 -> 8, 2 -> 9, u -> 10 (the path may contain spaces).
    fields = {"1": 8, "2": 9, "u": 10}.get(tag, 8)
    parts = record.split(" ", fields)
    xy = parts[1] if len(parts) > 1 else ".."
    entry: dict[str, Any] = {"path": parts[-1], "index": xy[0], "worktree": xy[1], "kind": kind}
    if tag == "2":
        entry["score"] = parts[8]
    return entry, tag == "2"


def parse_numstat(raw: bytes) -> dict[str, dict[str, Any]]:
    """``--numstat -z``: ``{path: {additions, deletions, binary}}`` keyed by the new path."""
    out: dict[str, dict[str, Any]] = {}
    records = _Records(raw)
    while records.left():
        record = records.take()
        if not record:
            continue
        added, _, rest = record.partition("\t")
        deleted, _, path = rest.partition("\t")
        if not path and records.left() >= 2:  # a rename: empty path, then old and new
            records.take()
            path = records.take()
        binary = added == "-"
        out[path] = {"additions": 0 if binary else int(added),
                     "deletions": 0 if binary else int(deleted), "binary": binary}
    return out


def parse_name_status(raw: bytes) -> list[dict[str, Any]]:
    """``--name-status -z``: ``[{path, status, old_path?}]``."""
    out: list[dict[str, Any]] = []
    records = _Records(raw)
    while records.left():
        code = records.take()
        if not code:
            continue
        letter = code[0]
        if letter in ("R", "C") and records.left() >= 2:
            entry = {"old_path": records.take(), "path": records.take()}
        else:
            entry = {"path": records.take() if records.left() else ""}
        entry["status"] = _STATUS_NAMES.get(letter, "unknown")
        out.append(entry)
    return out


def merge_files(numstat: bytes, name_status: bytes) -> list[dict[str, Any]]:
    """One list of changed files with status and line counts."""
    counts = parse_numstat(numstat)
    files = []
    for entry in parse_name_status(name_status):
        stats = counts.get(entry["path"], {"additions": 0, "deletions": 0, "binary": False})
        files.append({**entry, **stats})
    return files


def parse_log(raw: bytes) -> list[dict[str, Any]]:
    """``git log -z --format=LOG_FORMAT`` as commit records."""
    commits = []
    for record in _decode(raw).split("\0"):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, name, email, date, subject = (record.split("\x1f", 5) + [""] * 6)[:6]
        commits.append({"sha": sha, "parents": parents.split() if parents else [],
                        "author_name": name, "author_email": email, "date": date,
                        "subject": subject})
    return commits


def cap_text(raw: bytes, cap: int) -> tuple[str, bool]:
    """At most ``cap`` bytes of ``raw`` as text, and whether anything was cut."""
    if len(raw) <= cap:
        return _decode(raw), False
    return raw[:cap].decode("utf-8", "ignore") + "\n[... patch truncated ...]\n", True
