"""What the studio says on GitHub: a start comment (with the run's link), one end comment
(status, commit, cost, the failure's code and message), one refusal per refused delivery. A
review execution gets neither a start comment nor, when it succeeded, an end comment: the
reaction says it started and the posted review (verdict, summary, inline comments) is the
feedback; one that did not succeed gets the usual end comment (:func:`end_comment_wanted`).

Each comment carries a hidden marker naming what it is for (``<!-- studio-feedback: end ID
-->``); :meth:`services.repos.github_issues.GitHubIssues.put_comment` edits the comment with
that marker if there is one, so a resumed execution, or a second reaper pass, never adds a
second. Nothing from the run's logs goes into a comment: the error message is the recorded one,
passed through the redactor, and cut short.
"""

from __future__ import annotations

from services.db.models import NodeExecution
from services.db.redaction import Redactor
from services.repos.github_issues import GitHubIssues
from services.settings import StudioSettings

MAX_MESSAGE = 500


def marker(kind: str, ident: str) -> str:
    return f"<!-- studio-feedback: {kind} {ident} -->"


def run_link(settings: StudioSettings, execution_id: str) -> str:
    base = settings.public_url.rstrip("/")
    return f"{base}/#/runs/{execution_id}" if base else f"execution `{execution_id}`"


def _plain(text: str) -> str:
    """Untrusted-looking text made inert in Markdown (no HTML, no mentions, no links)."""
    cleaned = text.replace("<", "&lt;").replace(">", "&gt;").replace("@", "@\u200b")
    return cleaned.replace("`", "'")[:MAX_MESSAGE]


def end_comment_wanted(kind: object, status: str) -> bool:
    """Whether the run of a work item of ``kind`` that ended ``status`` gets an end comment."""
    return not (kind == "review" and status == "succeeded")


def started(issues: GitHubIssues, settings: StudioSettings, number: int,
            execution_id: str, what: str) -> None:
    issues.put_comment(number, marker("start", execution_id),
                       f"Studio started {what}: {run_link(settings, execution_id)}")


def ended(issues: GitHubIssues, settings: StudioSettings, number: int, row: NodeExecution,
          redactor: Redactor) -> None:
    lines = [f"Studio run ended: **{row.status}** ({run_link(settings, row.id)})"]
    if row.head_sha:
        lines.append(f"- commit: `{row.head_sha[:40]}`")
    if row.pr_url:
        lines.append(f"- pull request: {row.pr_url}")
    lines.append(f"- cost: ${row.cost_usd or 0:.4f}")
    if row.error_code:
        message = _plain(redactor.text(row.error_message or ""))
        lines.append(f"- failure: `{_plain(row.error_code)}`: {message}")
    issues.put_comment(number, marker("end", row.id), "\n".join(lines))


def refused(issues: GitHubIssues, number: int, delivery_id: str, why: str) -> None:
    issues.put_comment(number, marker("refusal", delivery_id),
                       f"Studio will not act on this: {why}")
