"""What ``studio worker``, ``studio reaper`` and ``studio api`` check before they start serving:
the database answers and the broker accepts a connection.

A wrong ``STUDIO_DATABASE_URL`` or ``STUDIO_BROKER_URL`` then stops the command at once with one
line naming the variable (:mod:`services.cli.config_errors` words it), instead of a worker that
retries forever in its logs, or a reaper thread that logs a traceback every pass.
"""

from __future__ import annotations

from celery import Celery

from services.db.session import open_database
from services.execution.errors import ConfigError
from services.settings import StudioSettings
from services.worker.names import broker_url

BROKER_PROBE_TIMEOUT_S = 5


def check_database(settings: StudioSettings) -> None:
    """Open the database (connecting, and checking its revision) and close it again; raises
    what SQLAlchemy raises for a URL that does not work."""
    open_database(settings).dispose()


def check_broker(app: Celery, settings: StudioSettings) -> None:
    """Connect to the broker once (no retries); raises kombu's ``OperationalError`` when it
    cannot be reached. Nothing to check without a broker (the embedded default)."""
    url = broker_url(settings)
    if url is None:
        return
    scheme = url.partition("://")[0] if "://" in url else ""
    try:
        connection = app.connection_for_write()
    except KeyError as exc:  # kombu: "No such transport"
        raise ConfigError(f"STUDIO_BROKER_URL: unknown broker transport {scheme!r} (expected "
                          "redis://HOST:PORT/DB or amqp://USER:PASSWORD@HOST:PORT/VHOST)") from exc
    with connection:
        connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0,
                                     timeout=BROKER_PROBE_TIMEOUT_S)
