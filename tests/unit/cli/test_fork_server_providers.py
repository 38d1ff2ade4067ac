"""The fork server's ``PROVIDERS`` argument: only names of the profiles' table are imported."""

from __future__ import annotations

import pytest

from services.cli.fork_server import adapters
from services.execution.providers.profiles import ADAPTER_MODULES


@pytest.mark.parametrize(("names", "expected"), [
    ("", []),
    ("codex", ["codex"]),
    ("claude,codex", ["claude", "codex"]),
    (" gemini ,codex,gemini,,", ["gemini", "codex"]),
    ("replay,os,../../os,services.execution.providers.codex,CODEX,sk-secret", []),
    ("codex;import os", []),
])
def test_only_known_provider_names_are_imported(names: str, expected: list[str]) -> None:
    assert adapters(names) == [ADAPTER_MODULES[name] for name in expected]
