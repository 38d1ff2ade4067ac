"""The capability matrix, ``studio providers`` and the docs page agree with each other."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from services.cli.main import app
from services.composition import PROVIDERS
from services.execution.providers.capabilities import (
    CAPABILITIES,
    FLAGS,
    GUARD_TITLES,
    GUARDS,
    matrix,
)

PAGE = Path(__file__).resolve().parents[4] / "docs" / "sphinx" / "node_executor_runtime.rst"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_every_provider_has_a_row_and_every_guard_a_site() -> None:
    assert set(CAPABILITIES) == set(PROVIDERS)
    for name, caps in CAPABILITIES.items():
        assert caps.provider == name
        assert set(caps.guards) == set(GUARDS) == set(GUARD_TITLES)
        assert all(site.strip() for site in caps.guards.values())
    assert [c.provider for c in CAPABILITIES.values() if c.self_driving_loop] == ["claude"]
    assert [c.provider for c in CAPABILITIES.values() if c.wire is None] == ["replay"]


def test_the_docs_page_states_every_provider_guard_and_cell() -> None:
    page = _flat(PAGE.read_text())
    for name in CAPABILITIES:
        assert f"``{name}``" in page, name
    for guard in GUARDS:
        assert GUARD_TITLES[guard] in page, guard
    for caps in CAPABILITIES.values():
        for guard, site in caps.guards.items():
            assert _flat(site) in page, (caps.provider, guard)
    for flag in FLAGS:
        assert f"``{flag}``" in page, flag


def test_studio_providers_json_is_the_matrix() -> None:
    result = CliRunner().invoke(app, ["providers", "--json"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    data = json.loads(lines[0])
    sandbox = data.pop("sandbox")  # the command sandbox (issue 19): mode and any warning
    assert set(sandbox) == {"configured", "mode", "warning"}
    legacy = data.pop("legacy_runtime")  # the legacy runtime (issue 15), one row per provider
    assert [row["provider"] for row in legacy] == list(CAPABILITIES)
    assert data == {"providers": matrix(), "guards": list(GUARDS)}
    assert [p["provider"] for p in data["providers"]] == list(CAPABILITIES)


def test_studio_providers_prints_a_table() -> None:
    result = CliRunner().invoke(app, ["providers"])
    assert result.exit_code == 0, result.output
    for name in CAPABILITIES:
        assert name in result.output
    for flag in FLAGS:
        assert flag in result.output
    assert "guard: error-loop detection" in result.output
    assert "Legacy runtime" in result.output and "Claude Code" in result.output


def test_the_legacy_matrix_names_exactly_the_clis_the_runtime_can_run() -> None:
    from services.execution.legacy.capabilities import LEGACY_CLIS as DESCRIBED
    from services.runs.legacy_runtime import LEGACY_CLIS as RUNNABLE

    assert set(DESCRIBED) == set(RUNNABLE)
    for info in DESCRIBED.values():
        assert set(info.guards) == set(GUARDS)
