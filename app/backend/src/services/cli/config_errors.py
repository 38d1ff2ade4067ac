"""Operators' configuration is input too: one clear line for a setting that does not work.

A ``STUDIO_*`` variable with a value that does not validate, a ``STUDIO_DATABASE_URL`` that cannot
be parsed, names a driver that does not exist or a server that cannot be reached, a
``STUDIO_BROKER_URL`` the same: every ``studio`` command answers with one line on stderr naming
the variable and the problem, and exits 2 (:data:`EXIT_CONFIG`), instead of a traceback. The
line never holds a secret: URLs are shown with their password replaced by ``***``, a value that
does not validate is not echoed at all, and the password is scrubbed from the driver's message
too.

:func:`config_error_line` classifies an exception raised anywhere in a command (``None``: not a
configuration problem, it is raised on); SQLAlchemy and kombu are looked up in ``sys.modules``
only, so the CLI imports neither for commands that do not use them.
"""

from __future__ import annotations

import sys
from functools import cache
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from pydantic import ValidationError

    from services.settings import StudioSettings

EXIT_CONFIG = 2
DATABASE_VARIABLE = "STUDIO_DATABASE_URL"
BROKER_VARIABLE = "STUDIO_BROKER_URL"
DATABASE_EXAMPLE = "postgresql://USER:PASSWORD@HOST:PORT/DATABASE"


def settings_error_line(exc: ValidationError) -> str:
    """``studio: invalid configuration: STUDIO_X: problem (got 'value'); STUDIO_Y: problem``.
    The value is echoed (shortened) for plain settings only, never for a secret one (a URL, a
    token, a key) nor for a structured one (JSON that may hold anything)."""
    problems = []
    for error in exc.errors(include_url=False):
        location = [str(part) for part in error.get("loc", ())]
        name = "STUDIO_" + location[0].upper() if location else "STUDIO_*"
        where = "".join(f"[{part}]" for part in location[1:])
        message = _one_line(str(error.get("msg", "invalid value")).removeprefix("Value error, "))
        value = error.get("input")
        if location and location[0] in _echoable() and isinstance(value, str):
            message += f" (got {value[:60]!r})"
        problems.append(f"{name}{where}: {message}")
    return "studio: invalid configuration: " + "; ".join(problems or ["invalid value"])


@cache
def _echoable() -> frozenset[str]:
    """The settings whose value may be shown: neither secrets nor structured values (read
    from the settings model when a line is first made: importing this module imports no
    settings)."""
    from services.settings import StudioSettings

    hidden = ("SecretStr", "list", "dict")
    return frozenset(name for name, field in StudioSettings.model_fields.items()
                     if not any(word in str(field.annotation) for word in hidden))


def redact_url(url: str) -> str:
    """``url`` with the password (if any) replaced by ``***``; something that does not even
    split as a URL is not shown."""
    try:
        parts = urlsplit(url)
        password = parts.password
        hostinfo = parts.netloc.rpartition("@")[2]
    except ValueError:
        return "(unparseable)"
    if password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    netloc = f"{user}:***@{hostinfo}" if password is not None else f"{user}@{hostinfo}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def _secret_of(url: str | None) -> str | None:
    if not url:
        return None
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def _one_line(text: str, secret: str | None = None) -> str:
    first = next((line.strip() for line in str(text).splitlines() if line.strip()), "")
    if secret:
        first = first.replace(secret, "***")
    return first[:300]


def _configured(settings: StudioSettings | None, variable: str) -> str | None:
    if settings is None:
        return None
    value = settings.database_url if variable == DATABASE_VARIABLE else settings.broker_url
    return value.get_secret_value() if value is not None else None


def database_error_line(exc: BaseException, settings: StudioSettings | None) -> str | None:
    """The line for a database URL that does not work, or ``None`` when ``exc`` is not one."""
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None:
        return None
    url = _configured(settings, DATABASE_VARIABLE)
    secret = _secret_of(url)
    shown = redact_url(url) if url else "the embedded SQLite database"
    if isinstance(exc, sa_exc.NoSuchModuleError):
        driver = _driver(url)
        return (f"studio: {DATABASE_VARIABLE}: unknown database driver {driver!r} in {shown} "
                f"(expected {DATABASE_EXAMPLE})")
    if isinstance(exc, sa_exc.ArgumentError):
        return (f"studio: {DATABASE_VARIABLE}: not a database URL (expected "
                f"{DATABASE_EXAMPLE})")
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        reason = _one_line(str(getattr(exc, "orig", None) or exc), secret)
        return f"studio: {DATABASE_VARIABLE}: cannot connect to {shown}: {reason}"
    if isinstance(exc, ValueError) and url and _from_url_parsing(exc):
        what = "its port is not a number; " if "int()" in str(exc) else ""
        return (f"studio: {DATABASE_VARIABLE}: not a database URL ({what}expected "
                f"{DATABASE_EXAMPLE})")
    return None


def _driver(url: str | None) -> str:
    scheme = (url or "").partition("://")[0]
    return scheme or "?"


def _from_url_parsing(exc: BaseException) -> bool:
    """A ``ValueError`` raised while SQLAlchemy parsed the URL (a port that is not a number)."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(("engine/url.py", "urllib/parse.py")):
            return True
        tb = tb.tb_next
    return False


def broker_error_line(exc: BaseException, settings: StudioSettings | None) -> str | None:
    """The line for a broker URL that does not work, or ``None`` when ``exc`` is not one."""
    kombu_exc = sys.modules.get("kombu.exceptions")
    if kombu_exc is None:
        return None
    url = _configured(settings, BROKER_VARIABLE)
    secret = _secret_of(url)
    shown = redact_url(url) if url else "(unset)"
    if isinstance(exc, kombu_exc.OperationalError):
        return (f"studio: {BROKER_VARIABLE}: cannot connect to {shown}: "
                f"{_one_line(str(exc), secret)}")
    return None


EXIT_DATABASE_LOST = 4


def database_fault_line(exc: BaseException, settings: StudioSettings | None) -> str | None:
    """The line for a database that this process had reached and then lost (a fault while
    running, not configuration: ``database connection lost during the run; retried N times``),
    or ``None``. The reason is the driver's first line, the password scrubbed."""
    loss = sys.modules.get("services.db.connection_loss")
    if loss is None or not loss.reached_before():
        return None
    sa_exc = sys.modules.get("sqlalchemy.exc")
    faults = (loss.ConnectionLost,) + ((sa_exc.OperationalError, sa_exc.InterfaceError)
                                        if sa_exc is not None else ())
    if not isinstance(exc, faults):
        return None
    if not isinstance(exc, loss.ConnectionLost) and not loss.is_connection_lost(exc):
        return None
    secret = _secret_of(_configured(settings, DATABASE_VARIABLE))
    if isinstance(exc, loss.ConnectionLost):
        reason = _one_line(f"{exc.what}: {exc.reason}", secret)
    else:
        reason = _one_line(str(getattr(exc, "orig", None) or exc), secret)
    reason = "".join(char for char in reason if char.isprintable())  # no terminal escapes
    return (f"studio: database connection lost during the run; retried {loss.retries()} "
            f"times ({reason})")


def config_error_line(exc: BaseException, settings: StudioSettings | None) -> str | None:
    """The one line for ``exc`` when it is a configuration problem, else ``None``."""
    from services.execution.errors import ConfigError

    if isinstance(exc, ConfigError):
        secrets = [_secret_of(_configured(settings, name))
                   for name in (DATABASE_VARIABLE, BROKER_VARIABLE)]
        line = _one_line(exc.message)
        for secret in secrets:
            line = line.replace(secret, "***") if secret else line
        return f"studio: {line}"
    return database_error_line(exc, settings) or broker_error_line(exc, settings)
