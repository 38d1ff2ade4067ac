"""``StudioSettings`` reads ``STUDIO_*`` as pydantic-settings did (without importing it).

The reference is pydantic-settings' own environment source, given a settings class with the same
fields and the configuration the settings had (prefix ``STUDIO_``, names in any case, no value
decoded: every list and JSON field was ``NoDecode``).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import SecretStr, ValidationError, create_model
from pydantic_settings import BaseSettings, EnvSettingsSource, SettingsConfigDict

from services.settings import StudioSettings, environment_values

ENVIRONMENT = {
    "STUDIO_LOG_LEVEL": "INFO",
    "studio_git_author_name": "lower case name",  # names in any case
    "Studio_Sandbox_Memory_Mb": "512",
    "STUDIO_CORS_ORIGINS": "https://a.example, https://b.example",
    "STUDIO_KUBE_NODE_SELECTOR": '{"pool": "agents"}',
    "STUDIO_MODEL_PRICES": '{"m": {"input": 1, "output": 2}}',
    "STUDIO_DATABASE_URL": "postgresql://u:p@h/db",
    "STUDIO_RETENTION_DAYS": "",
    "STUDIO_NOT_A_SETTING": "ignored",
    "NOT_STUDIO_LOG_LEVEL": "ignored",
}


def reference_source() -> EnvSettingsSource:
    fields: dict[str, Any] = {name: (field.annotation, field)
                              for name, field in StudioSettings.model_fields.items()}
    mirror = create_model("Mirror", __base__=BaseSettings, **fields)
    mirror.model_config = SettingsConfigDict(env_prefix="STUDIO_", extra="ignore",
                                             enable_decoding=False)
    return EnvSettingsSource(mirror)


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENVIRONMENT.items():
        monkeypatch.setenv(name, value)


@pytest.mark.usefixtures("environment")
def test_the_variables_read_are_those_pydantic_settings_read() -> None:
    ours = environment_values()
    assert ours == reference_source()()
    assert ours["git_author_name"] == "lower case name"
    assert "not_a_setting" not in ours and len(ours) == 8


@pytest.mark.usefixtures("environment")
def test_the_comparison_can_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Positive control: a variable changed between the two reads makes them differ."""
    ours = environment_values()
    monkeypatch.setenv("STUDIO_LOG_LEVEL", "DEBUG")
    assert ours != reference_source()()


@pytest.mark.usefixtures("environment")
def test_values_are_validated_and_keywords_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("STUDIO_RETENTION_DAYS")  # "" is not a number (with pydantic-settings too)
    settings = StudioSettings(log_level="ERROR")
    assert settings.log_level == "ERROR"
    assert settings.sandbox_memory_mb == 512
    assert settings.cors_origins == ["https://a.example", "https://b.example"]
    assert settings.kube_node_selector == {"pool": "agents"}
    assert settings.model_prices == {"m": {"input": 1.0, "output": 2.0}}
    assert settings.database_url == SecretStr("postgresql://u:p@h/db")


def test_a_bad_variable_is_a_validation_error_naming_the_field(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUDIO_SANDBOX_PROCESSES", "many")
    with pytest.raises(ValidationError) as raised:
        StudioSettings()
    [error] = raised.value.errors()
    assert error["loc"] == ("sandbox_processes",) and error["input"] == "many"


def test_defaults_are_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    """As with pydantic-settings (validate_default): the kubernetes executor without an image
    is refused although the image's default is not given."""
    monkeypatch.setenv("STUDIO_EXECUTOR", "kubernetes")
    monkeypatch.delenv("STUDIO_KUBE_IMAGE", raising=False)
    with pytest.raises(ValidationError, match="STUDIO_KUBE_IMAGE"):
        StudioSettings()
