"""The structured review a review execution answers with, and what is done to it before posting.

A reviewing model ends with one JSON object (:class:`Review`): a ``summary``, a ``verdict``
(``comment`` or ``request_changes``; ``approve`` only where the deployment allows it,
``STUDIO_REVIEW_ALLOW_APPROVE``) and ``findings`` (path, line on the pull request's new side,
severity, title, body). :func:`parse_review` validates it with pydantic; a malformed answer raises
:class:`ReviewInvalid` (the run gets one repair turn, then fails with ``review_invalid``).

:func:`commentable_lines` reads a unified diff's new-side lines (the ones GitHub accepts an
inline comment on); :func:`place_findings` keeps the findings on those lines inline and moves the
others into the summary. :func:`finding_marker` is the hidden marker each inline comment carries
(a hash of path, line anchor and title), so a later review of the same pull request finds and
updates its own earlier comment instead of posting a duplicate (F4).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from services.execution.errors import ErrorCode, ExecutionError

MAX_FINDINGS = 50
MARKER_RE = re.compile(r"<!-- studio-finding: ([0-9a-f]{16}) -->")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


class Verdict(StrEnum):
    COMMENT = "comment"
    REQUEST_CHANGES = "request_changes"
    APPROVE = "approve"


class Severity(StrEnum):
    INFO = "info"
    MINOR = "minor"
    MAJOR = "major"
    CRITICAL = "critical"


class Finding(BaseModel):
    """One finding, on a line of the pull request's new side."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(min_length=1, max_length=500)
    line: int = Field(ge=1)
    severity: Severity
    title: str = Field(min_length=1, max_length=200)
    body: str = Field(min_length=1, max_length=8000)


class Review(BaseModel):
    """The whole structured answer of a review execution."""

    model_config = ConfigDict(extra="forbid")

    summary: str = Field(min_length=1, max_length=20000)
    verdict: Verdict
    findings: list[Finding] = Field(default_factory=list, max_length=MAX_FINDINGS)


REVIEW_SCHEMA = Review.model_json_schema()


class ReviewInvalid(ExecutionError):
    """The model's review cannot be used (not JSON, wrong fields, a verdict not allowed)."""

    default_code = ErrorCode.REVIEW_INVALID


def _json_object(text: str) -> object:
    stripped = text.strip()
    fenced = re.search(r"```(?:json)?\s*(\{.*\})\s*```", stripped, re.DOTALL)
    candidates = [fenced.group(1)] if fenced else []
    start, end = stripped.find("{"), stripped.rfind("}")
    if start != -1 and end > start:
        candidates.append(stripped[start:end + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except json.JSONDecodeError:
            continue
    raise ReviewInvalid("the final answer holds no JSON object")


def parse_review(text: str | Mapping[str, object], *, allow_approve: bool) -> Review:
    """The validated review in ``text`` (or an already decoded object)."""
    data = text if isinstance(text, Mapping) else _json_object(text)
    try:
        review = Review.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'review'}: {e['msg']}"
                             for e in exc.errors(include_url=False, include_input=False)[:10])
        raise ReviewInvalid(f"the review does not validate: {problems}") from None
    if review.verdict is Verdict.APPROVE and not allow_approve:
        raise ReviewInvalid("the verdict `approve` is not allowed in this deployment; use "
                            "`comment` or `request_changes`")
    return review


def repair_prompt(error: ReviewInvalid) -> str:
    """The one repair turn's message."""
    return (f"Your review could not be used: {error.message}. Answer again with only the JSON "
            "object of the review (summary, verdict, findings), nothing else.")


def commentable_lines(patch: str) -> set[int]:
    """The new-side line numbers a unified diff ``patch`` (one file's hunks) shows: added and
    context lines, the lines GitHub takes an inline comment on."""
    lines: set[int] = set()
    current: int | None = None
    for raw in patch.splitlines():
        hunk = _HUNK.match(raw)
        if hunk is not None:
            current = int(hunk.group(1))
            continue
        if current is None or raw.startswith("\\"):
            continue
        if raw.startswith("-"):
            continue
        lines.add(current)
        current += 1
    return lines


@dataclass(frozen=True)
class Placed:
    """The findings GitHub takes inline, and the summary with the others moved into it."""

    inline: list[Finding]
    moved: list[Finding]
    summary: str


def place_findings(review: Review, commentable: Mapping[str, set[int]]) -> Placed:
    """Inline the findings on a diff line; the rest go into the summary (GitHub refuses an
    inline comment outside the diff with 422)."""
    inline = [f for f in review.findings if f.line in commentable.get(f.path, set())]
    moved = [f for f in review.findings if f not in inline]
    summary = review.summary
    if moved:
        summary += "\n\n**Findings outside the diff**\n" + "\n".join(
            f"- `{f.path}:{f.line}` ({f.severity.value}) {f.title}: {f.body}" for f in moved)
    return Placed(inline, moved, summary)


def finding_marker(path: str, anchor: str, title: str) -> str:
    """The hidden marker of an inline comment: a hash of its path, line anchor and title."""
    digest = hashlib.sha256(f"{path}\0{anchor.strip()}\0{title.strip().lower()}".encode())
    return f"<!-- studio-finding: {digest.hexdigest()[:16]} -->"


def marker_of(body: str) -> str | None:
    """The marker an earlier comment body carries, if any."""
    found = MARKER_RE.search(body)
    return found.group(0) if found else None


def comment_body(finding: Finding, marker: str) -> str:
    return f"**{finding.title}** ({finding.severity.value})\n\n{finding.body}\n\n{marker}"
