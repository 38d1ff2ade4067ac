"""``POST /api/webhooks/github`` without HTTP: verify, record, answer, say what to enqueue.

The signature is checked first, over the raw bytes (nothing is parsed or stored before it
holds: 401). Then the delivery id and event name (headers) must be well-formed (400, not
recorded: nothing to key it by), the body JSON (else recorded ``malformed``, 400). A delivery id
seen before answers 200 and does nothing. What starts nothing is recorded ``ignored`` (202);
``ping`` is recorded and answered (200). Work is recorded ``queued`` (202) and handed to the
worker (:mod:`services.triggers.processing`), or ``deferred`` while the kill switch is engaged
(started when it is released: :mod:`services.triggers.settle`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from services.db.integrations import IntegrationRepository
from services.db.pauses import killswitch_engaged
from services.db.session import Database
from services.db.triggers import DeliveryStore, TriggerStore
from services.settings import StudioSettings
from services.telemetry import tracing
from services.triggers.events import PING, QUEUED, TriggerRule, classify, repository_of
from services.triggers.signature import verify

DEFERRED, MALFORMED, DUPLICATE = "deferred", "malformed", "duplicate"
_DELIVERY_ID = re.compile(r"^[A-Za-z0-9-]{1,100}$")
_EVENT = re.compile(r"^[a-z_]{1,64}$")


@dataclass(frozen=True)
class Answer:
    """The HTTP answer, and the delivery to hand to the worker (if any)."""

    status: int
    body: dict[str, Any]
    enqueue: str | None = None
    code: str | None = field(default=None)  # a stable error code for a refusal


def rule_for(db: Database, repository: str | None) -> TriggerRule | None:
    row = TriggerStore(db).get(repository) if repository else None
    if row is None or not row.enabled:
        return None
    return TriggerRule(label=row.label, assignee=row.assignee, command=row.command,
                       review=bool(row.review))


def receive(db: Database, settings: StudioSettings, headers: Mapping[str, str],
            body: bytes) -> Answer:
    """One delivery; ``headers`` with lower-case names."""
    secret = IntegrationRepository(db, settings).webhook_secret()
    if not verify(secret.get_secret_value().encode() if secret else None, body,
                  headers.get("x-hub-signature-256")):
        return Answer(401, {"ok": False}, code="unauthorized")
    delivery_id = headers.get("x-github-delivery", "")
    event = headers.get("x-github-event", "")
    if not _DELIVERY_ID.match(delivery_id) or not _EVENT.match(event):
        return Answer(400, {"ok": False}, code="invalid_arguments")
    store = DeliveryStore(db)
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        fresh = store.record(delivery_id, event=event, outcome=MALFORMED,
                             detail="the body is not JSON")
        return Answer(400 if fresh else 200, {"ok": False, "delivery": delivery_id},
                      code="invalid_arguments" if fresh else None)
    with tracing.span("studio.webhook.delivery", {"studio.delivery_id": delivery_id,
                                                  "studio.webhook_event": event}):
        found = classify(event, payload, rule_for(db, repository_of(payload)))
        outcome = found.outcome
        if outcome == QUEUED and killswitch_engaged(db):
            outcome = DEFERRED
        tracing.annotate({"studio.webhook_outcome": outcome})
        fresh = store.record(delivery_id, event=event, action=found.action,
                             repository=found.repository, sender=found.sender,
                             number=found.number, outcome=outcome, detail=found.detail,
                             work=found.work, traceparent=tracing.current_traceparent())
    if not fresh:
        return Answer(200, {"ok": True, "delivery": delivery_id, "outcome": DUPLICATE})
    status = 200 if outcome == PING else 202
    return Answer(status, {"ok": True, "delivery": delivery_id, "outcome": outcome},
                  enqueue=delivery_id if outcome == QUEUED else None)
