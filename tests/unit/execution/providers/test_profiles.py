"""Provider profiles: one registry, read by the composition root; builders import SDKs late.

Building an adapter here opens no connection: the SDK clients are only constructed (the keys are
placeholders, the base URLs point nowhere that is ever called).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services import composition
from services.composition import EngineRequest, build_engine
from services.execution.errors import ConfigError
from services.execution.messages import ToolSchema
from services.execution.providers import capabilities, claude_tools, codex_wire, gemini_wire
from services.execution.providers.claude import ClaudeEngine
from services.execution.providers.codex import CodexClient
from services.execution.providers.gemini import GeminiClient
from services.execution.providers.profiles import (
    DEFAULT_MODELS,
    PROFILES,
    PROVIDERS,
    EngineSpec,
    configured_providers,
    provider_profile,
)
from services.execution.providers.replay import ReplayClient
from services.execution.tool_domains.registry import default_registry
from services.settings import StudioSettings

SCRIPT: dict[str, object] = {"turns": [{"final": "done"}]}
TOOLS = [ToolSchema(name=s.name, description=s.description, parameters=s.neutral_schema())
         for s in default_registry().specs()]
SDKS = ("openai", "google.genai", "claude_agent_sdk")


@pytest.fixture
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """Placeholder keys, so the SDK clients can be constructed (nothing is sent)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")
    monkeypatch.setenv("GEMINI_API_KEY", "placeholder")
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)


def _spec(tmp_path: Path, **overrides: object) -> EngineSpec:
    values: dict[str, object] = {"model": "m-1", "workspace": tmp_path / "ws",
                                 "run_dir": tmp_path / "run"}
    values.update(overrides)
    return EngineSpec(**values)  # type: ignore[arg-type]


def test_every_profile_is_named_as_its_key_and_its_capability_row() -> None:
    assert PROVIDERS == ("codex", "gemini", "claude", "replay")
    for name, profile in PROFILES.items():
        assert profile.name == name == profile.capabilities.provider
        assert DEFAULT_MODELS[name] == profile.default_model != ""
    assert [p.name for p in PROFILES.values() if p.needs_script] == ["replay"]


def test_the_composition_root_and_the_matrix_read_the_profiles() -> None:
    assert composition.PROVIDERS is PROVIDERS
    assert composition.DEFAULT_MODELS is DEFAULT_MODELS
    assert list(capabilities.CAPABILITIES) == list(PROVIDERS)
    for name, caps in capabilities.CAPABILITIES.items():
        assert caps is PROFILES[name].capabilities


def test_an_unknown_provider_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError, match="unknown provider 'nope'; choose one of codex, gemini"):
        provider_profile("nope")


@pytest.mark.usefixtures("keys")
@pytest.mark.parametrize(("name", "kind"), [
    ("codex", CodexClient), ("gemini", GeminiClient), ("claude", ClaudeEngine),
    ("replay", ReplayClient),
])
def test_each_profile_builds_its_adapter(tmp_path: Path, name: str, kind: type) -> None:
    engine = provider_profile(name).build(_spec(tmp_path, script=SCRIPT))
    assert isinstance(engine, kind)
    assert engine.provider == name
    assert engine.model == "m-1"


@pytest.mark.usefixtures("keys")
@pytest.mark.parametrize(("mode", "expected"), [("responses", "responses"), ("chat", "chat"),
                                                ("other", "responses")])
def test_codex_mode_comes_from_the_spec(tmp_path: Path, mode: str, expected: str) -> None:
    engine = provider_profile("codex").build(_spec(tmp_path, codex_mode=mode))
    assert isinstance(engine, CodexClient)
    assert engine.mode == expected


def test_replay_without_a_script_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a script"):
        provider_profile("replay").build(_spec(tmp_path))


def test_claude_keeps_only_the_allowed_environment(tmp_path: Path) -> None:
    environ = {"ANTHROPIC_API_KEY": "placeholder", "GITHUB_TOKEN": "ghp_not_for_claude"}
    engine = provider_profile("claude").build(_spec(tmp_path, environ=environ))
    assert isinstance(engine, ClaudeEngine)
    assert engine.config.env["ANTHROPIC_API_KEY"] == "placeholder"
    assert "GITHUB_TOKEN" not in engine.config.env
    assert engine.config.transcript_dir == tmp_path / "run" / "claude-transcript"
    assert engine.config.scratch_dir == tmp_path / "run"


def test_the_spec_never_shows_the_environment() -> None:
    spec = EngineSpec(model="m", workspace=Path("/w"), run_dir=Path("/r"),
                      environ={"ANTHROPIC_API_KEY": "sk-secret-value"})
    assert "sk-secret-value" not in repr(spec)


def test_build_engine_uses_the_profile_default_model(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_not_for_claude")
    settings = StudioSettings(data_dir=tmp_path / "data", database_url=None)
    replay = build_engine(EngineRequest(provider="replay", model=None, workspace=tmp_path,
                                        run_dir=tmp_path, script=SCRIPT), settings)
    assert isinstance(replay, ReplayClient) and replay.model == "replay"
    claude = build_engine(EngineRequest(provider="claude", model=None, workspace=tmp_path,
                                        run_dir=tmp_path), settings)
    assert isinstance(claude, ClaudeEngine) and claude.model == "claude-sonnet-4-5"
    assert "GITHUB_TOKEN" not in claude.config.env
    with pytest.raises(ConfigError, match="unknown provider"):
        build_engine(EngineRequest(provider="nope", model=None, workspace=tmp_path,
                                   run_dir=tmp_path), settings)


def test_the_wire_modules_send_the_profile_tool_schema() -> None:
    codex, gemini = PROFILES["codex"].tool_schema, PROFILES["gemini"].tool_schema
    responses = codex_wire.responses_tools(TOOLS)
    chat = codex_wire.chat_tools(TOOLS)
    declarations = gemini_wire.function_declarations(TOOLS)[0]["functionDeclarations"]
    for i, tool in enumerate(TOOLS):
        assert responses[i]["parameters"] == codex(tool.parameters), tool.name
        assert chat[i]["function"]["parameters"] == codex(tool.parameters), tool.name
        assert declarations[i]["parametersJsonSchema"] == gemini(tool.parameters), tool.name
    assert vars(claude_tools)["anthropic"] is PROFILES["claude"].tool_schema  # what it imports
    assert PROFILES["replay"].tool_schema(TOOLS[0].parameters) == TOOLS[0].parameters


_PROBE = """
import json, sys
import services.composition, services.execution.providers.capabilities
before = sorted(sys.modules)
from services.execution.providers.profiles import EngineSpec, provider_profile
from pathlib import Path
provider_profile(sys.argv[1]).build(EngineSpec(model="m", workspace=Path("."), run_dir=Path(".")))
print(json.dumps([before, sorted(sys.modules)]))
"""


@pytest.mark.parametrize(("name", "sdk"), [("codex", "openai"), ("gemini", "google.genai"),
                                           ("claude", "claude_agent_sdk")])
def test_profiles_import_an_sdk_only_when_building_its_adapter(name: str, sdk: str) -> None:
    env = {"OPENAI_API_KEY": "sk-placeholder", "GEMINI_API_KEY": "placeholder",
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-c", _PROBE, name], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert proc.returncode == 0, proc.stderr
    before, after = (set(names) for names in json.loads(proc.stdout))

    def loaded(modules: set[str], package: str) -> bool:
        return any(m == package or m.startswith(package + ".") for m in modules)

    assert not any(loaded(before, s) for s in SDKS)
    assert loaded(after, sdk)
    assert [s for s in SDKS if loaded(after, s)] == [sdk]


# ---------------------------------------------------------------- the sites that read needs_script


def test_studio_run_asks_for_a_script_where_the_profile_needs_one(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from services.cli.main import app

    runner = CliRunner()
    missing = runner.invoke(app, ["run", "--provider", "replay", "--workspace", str(tmp_path),
                                  "do it"])
    assert missing.exit_code == 2
    assert "the replay provider needs --script FILE" in missing.output
    unknown = runner.invoke(app, ["run", "--provider", "nope", "--workspace", str(tmp_path), "x"])
    assert unknown.exit_code == 2
    assert "unknown provider 'nope'; choose one of codex, gemini, claude, replay" in unknown.output


def test_the_api_takes_a_script_only_where_the_profile_needs_one() -> None:
    from services.api.errors import ApiError
    from services.api.routers.executions import _check_script
    from services.api.schemas import ExecutionCreate

    def body(provider: str, script: dict[str, object] | None) -> ExecutionCreate:
        return ExecutionCreate.model_validate({"repo_url": "https://example.test/r.git",
                                               "provider": provider, "prompt": "p",
                                               "replay_script": script})

    _check_script(body("replay", SCRIPT))
    _check_script(body("codex", None))
    with pytest.raises(ApiError, match="the replay provider needs replay_script"):
        _check_script(body("replay", None))
    with pytest.raises(ApiError, match="replay_script is only for the replay provider"):
        _check_script(body("gemini", SCRIPT))


def test_prewarm_imports_the_adapter_in_a_background_thread() -> None:
    """In a fresh interpreter: the adapter (and its SDK) is loaded by the thread, not before;
    a provider without an SDK and an adapter already loaded start no thread."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from services.execution.providers.profiles import prewarm\n"
        "assert 'openai' not in sys.modules\n"
        "assert prewarm('replay') is None and prewarm('no-such-provider') is None\n"
        "thread = prewarm('codex')\n"
        "assert thread is not None and thread.daemon\n"
        "thread.join(60)\n"
        "assert 'services.execution.providers.codex' in sys.modules and 'openai' in sys.modules\n"
        "assert prewarm('codex') is None\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


API_KEYS = {"codex": "api_key", "gemini": "api_key", "claude": "api_key"}


@pytest.mark.parametrize(("modes", "environ", "expected"), [
    # nothing configured: no provider (replay needs nothing and is never named)
    ({}, {}, ()),
    (API_KEYS, {}, ()),
    # a credential of the API key mode, each alternative the mode lists
    (API_KEYS, {"OPENAI_API_KEY": "sk-1"}, ("codex",)),
    ({}, {"OPENAI_API_KEY": "sk-1"}, ("codex",)),  # no mode given: the API key
    (API_KEYS, {"GOOGLE_API_KEY": "g"}, ("gemini",)),
    (API_KEYS, {"GEMINI_API_KEY": "g"}, ("gemini",)),
    (API_KEYS, {"ANTHROPIC_AUTH_TOKEN": "t"}, ("claude",)),
    (API_KEYS, {"ANTHROPIC_API_KEY": "a", "OPENAI_API_KEY": "o", "GEMINI_API_KEY": "g"},
     ("codex", "gemini", "claude")),
    # empty, blank, or what check_mode refuses: not a credential
    (API_KEYS, {"OPENAI_API_KEY": ""}, ()),
    (API_KEYS, {"OPENAI_API_KEY": " \t\n "}, ()),
    (API_KEYS, {"OPENAI_API_KEY": "sk-1\x00"}, ()),
    (API_KEYS, {"ANTHROPIC_API_KEY": "a\nb"}, ()),
    # a variable of the mode that is no credential, or of another mode, does not count
    (API_KEYS, {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                "AZURE_OPENAI_API_KEY": "az", "AWS_ACCESS_KEY_ID": "AKIA",
                "GOOGLE_APPLICATION_CREDENTIALS": "/adc.json"}, ()),
    # a cloud mode is the operator's choice: configured whatever the environment says
    ({**API_KEYS, "codex": "azure"}, {}, ("codex",)),
    ({**API_KEYS, "claude": "bedrock_web_identity", "gemini": "vertex"}, {},
     ("gemini", "claude")),
    # a mode no profile offers, a blank one, a provider of no profile
    ({"codex": "no-such-mode", "gemini": "Vertex", "claude": "API_KEY"},
     {"OPENAI_API_KEY": "sk-1", "ANTHROPIC_API_KEY": "a"}, ()),
    ({**API_KEYS, "gemini": " vertex "}, {}, ("gemini",)),  # as cloud_auth.modes_in reads it
    ({"codex": "  ", "replay": "api_key", "../../os": "api_key"},
     {"OPENAI_API_KEY": "sk-1"}, ("codex",)),
])
def test_configured_providers(modes: dict[str, str], environ: dict[str, str],
                              expected: tuple[str, ...]) -> None:
    """The providers a worker's fork server imports before it is ready: those whose auth mode
    is a cloud one, or whose API key mode finds a usable credential; names only."""
    assert configured_providers(modes, environ) == expected


def test_configured_providers_from_the_settings() -> None:
    """The worker's call: the modes the settings pick (composition.auth_modes)."""
    chosen = {"codex_auth": "azure", "gemini_auth": "api_key", "claude_auth": "api_key"}
    settings = StudioSettings(**chosen)  # type: ignore[arg-type]
    assert configured_providers(composition.auth_modes(settings), {}) == ("codex",)
    settings = StudioSettings(**{**chosen, "codex_auth": "api_key"})  # type: ignore[arg-type]
    assert configured_providers(composition.auth_modes(settings),
                                {"ANTHROPIC_API_KEY": "a"}) == ("claude",)
