"""The provider capability matrix: what each adapter does, and where each guard acts for it.

The rows are the ``capabilities`` of the provider profiles (:mod:`.profiles`, where each
provider's facts live); this module is the matrix view of them, read by ``studio providers`` (the
CLI prints it), the API's ``/providers``, the docs page ``node_executor_runtime`` (which must name
every provider and guard, a unit test checks it) and the conformance table in
``tests/integration/conformance/`` (whose rows assert, per provider, the behaviour stated here).
Changing a guard's site in a profile without changing the loop makes the conformance table fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from services.execution.providers.profiles import (
    FLAGS,
    GUARD_TITLES,
    GUARDS,
    PROFILES,
    ProviderCapabilities,
)

__all__ = ["CAPABILITIES", "FLAGS", "GUARDS", "GUARD_TITLES", "ProviderCapabilities", "matrix"]

CAPABILITIES: Mapping[str, ProviderCapabilities] = {
    name: profile.capabilities for name, profile in PROFILES.items()
}


def matrix() -> list[dict[str, Any]]:
    """The whole matrix as JSON-ready rows (``studio providers --json``)."""
    return [caps.as_dict() for caps in CAPABILITIES.values()]
