"""The auth modes as data: what each reads, how a missing or malformed value is refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from services.execution.errors import ConfigError
from services.execution.providers.cloud_auth import (
    ALL_NAMES,
    MODES,
    auth_mode,
    check_mode,
    mode_environment,
    modes_in,
)
from services.settings import PROVIDER_SECRET_VARIABLES, StudioSettings


def test_each_setting_accepts_exactly_the_modes_the_table_lists() -> None:
    for provider, field in (("claude", "claude_auth"), ("gemini", "gemini_auth"),
                            ("codex", "codex_auth")):
        for name in MODES[provider]:
            assert getattr(StudioSettings(**{field: name}), field).value == name
        with pytest.raises(ValidationError, match=field):
            StudioSettings(**{field: "iam-magic"})


def test_every_secret_of_every_mode_is_redacted_everywhere() -> None:
    secrets = {name for modes in MODES.values() for mode in modes.values()
               for name in mode.secrets if name != "AWS_ACCESS_KEY_ID"}
    assert secrets <= set(PROVIDER_SECRET_VARIABLES)


def test_mode_environment_takes_the_mode_variables_only() -> None:
    environ = {"AWS_REGION": "eu-west-1", "AWS_SECRET_ACCESS_KEY": "s", "ANTHROPIC_API_KEY": "k",
               "GOOGLE_APPLICATION_CREDENTIALS": "/g.json", "HOME": "/root"}
    env = mode_environment(auth_mode("claude", "bedrock_web_identity"), environ)
    assert env == {"AWS_REGION": "eu-west-1", "CLAUDE_CODE_USE_BEDROCK": "1"}
    assert "HOME" not in ALL_NAMES


def test_modes_in_reads_the_settings_names_and_defaults_to_the_api_key() -> None:
    modes = modes_in({"STUDIO_GEMINI_AUTH": "vertex"})
    assert {p: m.name for p, m in modes.items()} == {
        "claude": "api_key", "gemini": "vertex", "codex": "api_key"}


@pytest.mark.parametrize(("mode", "environ", "message"), [
    ("bedrock", {"AWS_REGION": "eu-west-1"},
     "STUDIO_CLAUDE_AUTH=bedrock needs credentials: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY "
     "or AWS_BEARER_TOKEN_BEDROCK"),
    ("bedrock_web_identity", {"AWS_REGION": "eu-west-1"},
     "needs AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE"),
    ("bedrock_web_identity", {"AWS_REGION": "eu-west-1", "AWS_ROLE_ARN": "role",
                              "AWS_WEB_IDENTITY_TOKEN_FILE": "/t"}, "AWS_ROLE_ARN is not"),
    ("vertex", {"ANTHROPIC_VERTEX_PROJECT_ID": "p-1234", "CLOUD_ML_REGION": "x",
                "GOOGLE_APPLICATION_CREDENTIALS": "relative.json"}, "CLOUD_ML_REGION is not"),
    ("bedrock", {"AWS_REGION": "eu-west-1", "AWS_BEARER_TOKEN_BEDROCK": "tok\r\nX: y"},
     "AWS_BEARER_TOKEN_BEDROCK holds control characters"),
])
def test_check_mode_names_the_setting_and_the_variable(mode: str, environ: dict[str, str],
                                                       message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_mode(auth_mode("claude", mode), environ)
    assert message in str(caught.value)
    assert "tok" not in str(caught.value)  # values are never echoed
