"""Team budget alerts to a team's notification URL: a JSON POST signed with HMAC-SHA256.

:func:`install` registers :func:`deliver_later` as a hook of :mod:`services.db.team_budget`:
each new alert is sent by a daemon thread (a run never waits for it), tried
``team_alert_attempts`` times with exponential backoff from ``team_alert_backoff_s`` (any
answer other than 2xx, or no answer, counts as a failure); the alert's row records the attempts,
the delivery time or the last error. A process that ends waits a bounded time for deliveries
still under way (:func:`drain`).

The body is ``{"event": "team_budget_alert", "team", "month", "threshold", "spent_usd",
"budget_usd"}``; headers ``Content-Type: application/json``, ``X-Studio-Event:
team_budget_alert`` and ``X-Studio-Signature: sha256=<hex HMAC-SHA256 of the body>`` keyed with
``STUDIO_TEAM_ALERT_SECRET`` (absent when no key is configured). The URL is never logged with
more than its origin.
"""

from __future__ import annotations

import atexit
import hashlib
import hmac
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from sqlalchemy import update

from services.db.base import utcnow
from services.db.models import TeamBudgetAlert
from services.db.session import Database
from services.db.team_budget import ALERT_HOOKS, TeamAlert
from services.settings import StudioSettings

log = logging.getLogger(__name__)
SIGNATURE_HEADER = "X-Studio-Signature"
DRAIN_S = 10.0
_pending: list[threading.Thread] = []
_installed: dict[str, object] = {}


def body_of(alert: TeamAlert) -> bytes:
    return json.dumps({"event": "team_budget_alert", "team": alert.team, "month": alert.month,
                       "threshold": alert.threshold, "spent_usd": round(alert.spent_usd, 6),
                       "budget_usd": round(alert.budget_usd, 6)}, sort_keys=True).encode()


def signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or ''}"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # a redirect is a failure: the signed body goes to the URL configured only


def _post(url: str, body: bytes, secret: str | None) -> None:
    headers = {"Content-Type": "application/json", "X-Studio-Event": "team_budget_alert"}
    if secret:
        headers[SIGNATURE_HEADER] = signature(secret, body)
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    opener = urllib.request.build_opener(_NoRedirect, urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as answer:
        if not 200 <= answer.status < 300:
            raise urllib.error.HTTPError(url, answer.status, "not 2xx", answer.headers, None)


def _record(db: Database, alert: TeamAlert, attempts: int, error: str | None) -> None:
    values: dict[str, object] = {"attempts": attempts, "last_error": error}
    if error is None:
        values["delivered_at"] = utcnow()
    try:
        with db.session() as session:
            session.execute(update(TeamBudgetAlert).where(
                TeamBudgetAlert.team_id == alert.team_id, TeamBudgetAlert.month == alert.month,
                TeamBudgetAlert.threshold == alert.threshold).values(**values))
    except Exception:  # the delivery's bookkeeping never fails anything else
        log.warning("team budget alert: recording the delivery failed", exc_info=True)


def deliver(db: Database, settings: StudioSettings, alert: TeamAlert) -> bool:
    """Send ``alert`` (retried with backoff); whether it was delivered."""
    if not alert.notify_url:
        return False
    body = body_of(alert)
    secret = settings.team_alert_secret.get_secret_value() if settings.team_alert_secret \
        else None
    delay, error = settings.team_alert_backoff_s, "not sent"
    for attempt in range(1, settings.team_alert_attempts + 1):
        try:
            _post(alert.notify_url, body, secret)
        except (OSError, ValueError) as exc:
            error = type(exc).__name__ + (f" {exc.code}" if isinstance(
                exc, urllib.error.HTTPError) else "")
            log.warning("team budget alert to %s: attempt %d failed (%s)",
                        _origin(alert.notify_url), attempt, error)
            if attempt < settings.team_alert_attempts:
                time.sleep(delay)
                delay *= 2
            continue
        _record(db, alert, attempt, None)
        return True
    _record(db, alert, settings.team_alert_attempts, error[:200])
    return False


def deliver_later(db: Database, settings: StudioSettings, alert: TeamAlert) -> None:
    thread = threading.Thread(target=deliver, args=(db, settings, alert), daemon=True,
                              name=f"team-alert-{alert.team}-{alert.threshold}")
    _pending.append(thread)
    thread.start()


def drain(timeout_s: float = DRAIN_S) -> None:
    """Wait (at most ``timeout_s`` in all) for deliveries under way."""
    deadline = time.monotonic() + timeout_s
    for thread in list(_pending):
        thread.join(max(0.0, deadline - time.monotonic()))


def install(db: Database, settings: StudioSettings) -> None:
    """Deliver this process's alerts through ``db`` (once per process; the latest wins)."""
    hook = _installed.get("hook")
    if hook is not None:
        ALERT_HOOKS.remove(hook)  # type: ignore[arg-type]
    else:
        atexit.register(drain)

    def send(alert: TeamAlert) -> None:
        deliver_later(db, settings, alert)

    _installed["hook"] = send
    ALERT_HOOKS.append(send)
