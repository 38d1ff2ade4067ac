"""A recorded delivery acted on, on the worker (without a broker: where the API runs work).

In order: the kill switch (engaged: ``deferred``, started once released), the repository's
trigger (gone or off: ``ignored``), the sender's permission on the repository (write, maintain
or admin, asked through PyGithub and cached briefly; anyone else: one refusal comment,
``refused``), for a follow-up or a review the pull request (from a fork: a refusal comment,
``refused``, and the token is never used towards the fork; for a follow-up, one the studio did
not open: ``ignored``; any pull request may be reviewed), then
the slot (:func:`services.triggers.slots.start_work`: ``started`` or ``coalesced``). The
triggering comment or issue gets an ``eyes`` reaction. A delivery already acted on (the task
delivered twice) is left alone: the delivery is claimed first (``processing``, one
conditional UPDATE).
"""

from __future__ import annotations

import logging

from services.db.pauses import killswitch_engaged
from services.db.session import Database
from services.db.triggers import DeliveryStore, TriggerStore
from services.execution.errors import StudioError
from services.repos.github_issues import GitHubIssues
from services.settings import StudioSettings
from services.telemetry import tracing
from services.triggers import feedback, starting  # noqa: F401 - registers the kinds
from services.triggers.events import FOLLOW_UP, IGNORED, QUEUED, REVIEW
from services.triggers.github import client, may_trigger
from services.triggers.ingress import DEFERRED
from services.triggers.slots import Launch, start_work

log = logging.getLogger(__name__)
REFUSED, FAILED, PROCESSING = "refused", "failed", "processing"


def process_delivery(db: Database, settings: StudioSettings, delivery_id: str,
                     launch: Launch) -> str:
    """Act on one recorded delivery; answers its outcome."""
    store = DeliveryStore(db)
    if not store.claim(delivery_id, (QUEUED, DEFERRED), PROCESSING):
        found = store.get(delivery_id)  # acted on already (the task delivered twice), or unknown
        return found.outcome if found is not None else "unknown"
    delivery = store.get(delivery_id)
    assert delivery is not None
    headers = {"traceparent": delivery.traceparent} if delivery.traceparent else {}
    with tracing.inherited(headers), tracing.span(
            "studio.webhook.process", {"studio.delivery_id": delivery_id}):
        outcome, detail, execution_id = _act(db, settings, delivery_id, launch)
        tracing.annotate({"studio.webhook_outcome": outcome,
                          "studio.execution_id": execution_id or ""})
    store.update(delivery_id, outcome=outcome, detail=detail[:1000],
                 execution_id=execution_id)
    log.info("delivery %s: %s (%s)", delivery_id, outcome, detail)
    return outcome


def _act(db: Database, settings: StudioSettings, delivery_id: str,
         launch: Launch) -> tuple[str, str, str | None]:
    if killswitch_engaged(db):
        return DEFERRED, "the kill switch is engaged", None
    delivery = DeliveryStore(db).get(delivery_id)
    assert delivery is not None
    trigger = TriggerStore(db).get(delivery.repository or "")
    work = dict(delivery.work or {})
    if trigger is None or not trigger.enabled or not work or delivery.number is None:
        return IGNORED, "no trigger for this repository", None
    work["deliveries"] = [delivery_id]
    try:
        issues = client(db, settings, trigger.repository)
    except StudioError as error:
        return FAILED, error.message, None
    try:
        refusal = _refusal(issues, delivery.sender or "", work, delivery.number)
        if refusal is not None:
            outcome, why = refusal
            if outcome == REFUSED:
                feedback.refused(issues, delivery.number, delivery_id, why)
            return outcome, why, None
        offered = start_work(db, settings, trigger.repository, delivery.number, work, launch)
        _react(issues, work)
        return offered.outcome, "", offered.execution_id
    except StudioError as error:
        return FAILED, f"{error.code}: {error.message}", None
    finally:
        issues.close()


def _refusal(issues: GitHubIssues, sender: str, work: dict[str, object],
             number: int) -> tuple[str, str] | None:
    allowed, permission = may_trigger(issues, sender)
    if not allowed:
        return REFUSED, (f"the sender has {permission!r} permission on this repository; "
                         "write, maintain or admin is needed to start work")
    if work.get("kind") in (FOLLOW_UP, REVIEW):
        head = issues.pull_head(number)
        if head.from_fork:
            what = "follow-up" if work.get("kind") == FOLLOW_UP else "review"
            return REFUSED, f"this pull request comes from a fork: no {what} runs on it"
        if work.get("kind") == FOLLOW_UP and not head.opened_by_studio:
            return IGNORED, "not a pull request the studio opened"
    return None


def _react(issues: GitHubIssues, work: dict[str, object]) -> None:
    react = work.get("react")
    if not isinstance(react, dict) or not isinstance(react.get("id"), int):
        return
    try:
        issues.react(str(react["target"]), int(react["id"]))
    except StudioError as error:
        log.warning("reaction not posted (%s)", error.code)
