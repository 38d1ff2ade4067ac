"""Every provider fact comes from its profile (``providers.profiles``), and the tables that must
name providers anyway agree with it.

A provider's facts (default model, auth setting and modes, legacy CLI, telemetry name) are
stated once, on its :class:`ProviderProfile`; the API's provider type, the auth maps of the
composition root and of the executors, and the default models are derived from it. What cannot
be derived (the settings' auth enums: the settings layer sits below the engine; the legacy
runtime's CLI factories) is compared with it here, and a scan of the source finds any new
table keyed by provider names outside the profiles.
"""

from __future__ import annotations

import ast
from enum import StrEnum
from pathlib import Path

import pytest

from services import composition
from services.api.schemas import ExecutionCreate
from services.execution.legacy import capabilities as legacy_capabilities
from services.execution.providers import cloud_auth
from services.execution.providers.profiles import (
    LEGACY_PROVIDERS,
    PROFILES,
    PROVIDERS,
    legacy_refusal,
    model_or_default,
    telemetry_name,
)
from services.executors.cloud_env import settings_modes
from services.runs import legacy_runtime
from services.settings import StudioSettings

SRC = Path(__file__).resolve().parents[4] / "app" / "backend" / "src" / "services"
# Where a table keyed by provider names may stand: the profiles, the auth modes' data they read,
# the legacy runtime's CLI factories and its capability rows (both compared below).
TABLES_ALLOWED = {"execution/providers/profiles.py", "execution/providers/cloud_auth.py",
                  "runs/legacy_runtime.py", "execution/legacy/capabilities.py"}


def test_the_api_provider_enum_is_the_profiles_names() -> None:
    schema = ExecutionCreate.model_json_schema()
    assert schema["properties"]["provider"]["enum"] == list(PROVIDERS)


@pytest.mark.parametrize("hostile", ["nope", "CODEX", "codex ", "", "codex\x00", "replay;rm"])
def test_the_api_refuses_a_provider_without_a_profile(hostile: str) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        ExecutionCreate(repo_url="https://example.test/r.git", provider=hostile, prompt="p")
    assert caught.value.errors()[0]["loc"] == ("provider",)


def test_every_default_model_comes_from_the_profile() -> None:
    for name, profile in PROFILES.items():
        assert model_or_default(name, None) == model_or_default(name, "") == profile.default_model
        assert model_or_default(name, "chosen-1") == "chosen-1"
    assert model_or_default("nope", None) == ""


def test_the_auth_settings_and_modes_come_from_the_profile() -> None:
    with_auth = {name for name, p in PROFILES.items() if p.auth_modes}
    assert with_auth == set(cloud_auth.MODES) == {"codex", "gemini", "claude"}
    assert PROFILES["replay"].auth_setting is None and PROFILES["replay"].auth_field is None
    fields = StudioSettings.model_fields
    for name in with_auth:
        profile = PROFILES[name]
        assert profile.auth_setting == f"STUDIO_{name.upper()}_AUTH"
        assert profile.auth_field is not None
        enum = fields[profile.auth_field].annotation
        assert isinstance(enum, type) and issubclass(enum, StrEnum)
        assert [m.value for m in enum] == list(profile.auth_modes)  # the same names, in order
        assert fields[profile.auth_field].default.value == cloud_auth.API_KEY
        for mode in profile.auth_modes.values():
            assert mode.provider == name and mode.setting == profile.auth_setting


def test_the_auth_maps_read_each_profiles_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = {"claude": "vertex", "gemini": "vertex", "codex": "azure"}
    for name, mode in chosen.items():
        setting = PROFILES[name].auth_setting
        assert setting is not None
        monkeypatch.setenv(setting, mode)
    settings = StudioSettings()
    assert composition.auth_modes(settings) == chosen
    configured = settings_modes(settings)
    assert {name: mode.name for name, mode in configured.items()} == chosen
    assert configured == composition.configured_auth_modes(settings)
    assert composition.auth_modes(StudioSettings(_env_file=None, claude_auth="api_key",
                                                 gemini_auth="api_key", codex_auth="api_key")
                                  ) == dict.fromkeys(chosen, "api_key")


def test_the_legacy_clis_are_the_profiles_legacy_providers() -> None:
    assert tuple(n for n, p in PROFILES.items() if p.legacy_cli) == LEGACY_PROVIDERS
    assert set(legacy_runtime.LEGACY_CLIS) == set(LEGACY_PROVIDERS)
    assert set(legacy_capabilities.LEGACY_CLIS) == set(LEGACY_PROVIDERS)
    assert legacy_runtime.legacy_refusal is legacy_refusal
    for name in PROVIDERS:
        refusal = legacy_refusal(name)
        assert (refusal is None) == (name in LEGACY_PROVIDERS)
    refusal = legacy_refusal("replay")
    assert refusal is not None and refusal.code.value == "unsupported_capability"
    assert "available: claude, codex, gemini" in refusal.message


def test_the_telemetry_names_come_from_the_profile() -> None:
    assert {name: telemetry_name(name) for name in PROVIDERS} == {
        "codex": "openai", "gemini": "gcp.gemini", "claude": "anthropic",
        "replay": "studio.replay"}
    assert telemetry_name("other") == "studio.other"


def _provider_tables(tree: ast.AST) -> list[int]:
    """Lines of dict literals with two or more provider names as keys."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            if len(keys & set(PROVIDERS)) >= 2:
                lines.append(node.lineno)
    return lines


def test_no_table_keyed_by_provider_names_outside_the_profiles() -> None:
    found = {}
    for path in sorted(SRC.rglob("*.py")):
        relative = path.relative_to(SRC).as_posix()
        lines = _provider_tables(ast.parse(path.read_text()))
        if lines and relative not in TABLES_ALLOWED:
            found[relative] = lines
    assert found == {}
    # The witness: the scan sees such a table (as telemetry's used to be written).
    assert _provider_tables(ast.parse('T = {"codex": "openai", "claude": "anthropic"}')) == [1]
