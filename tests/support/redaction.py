"""The redactor a test gives the journal and the execution store.

The database's collaborators have no default redactor (each is given its run's); a test that is
not about redaction gives them this one: the secrets of the settings the environment configures,
what the deployment's own redactor starts from (``Redactor.from_settings``).
"""

from __future__ import annotations

from services.db.redaction import Redactor
from services.settings import StudioSettings


def settings_redactor() -> Redactor:
    """A redactor of the environment's settings' secrets."""
    return Redactor.from_settings(StudioSettings())
