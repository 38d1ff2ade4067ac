"""gemini through Vertex AI (application default credentials) and codex through Azure OpenAI: the
real ``google-genai`` (with ``google-auth``) and ``openai`` SDKs, built the way the composition
root builds them for ``STUDIO_GEMINI_AUTH=vertex`` and ``STUDIO_CODEX_AUTH=azure``, against
:mod:`tests.support.cloud_endpoints`, which issues Google access tokens (checking a service
account's RS256 assertion with its public key, or a workload identity federation token exchange)
and
requires exactly the token it issued, or Azure's ``api-key`` header / Entra bearer token, the
deployment URL and the ``api-version``."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from services.execution.errors import ConfigError, ProviderError
from services.execution.messages import Message, ModelRequest, ModelResponse, Role, TextPart
from services.execution.ports import ModelClient
from services.execution.providers.profiles import EngineSpec, provider_profile
from tests.integration.providers.cloud_fixtures import (
    API_VERSION,
    AZURE_AD_TOKEN,
    AZURE_KEY,
    PROJECT,
    VERTEX_REGION,
    GoogleCredentials,
    external_account_file,
    service_account_file,
)
from tests.support.cloud_endpoints import (
    CloudEndpoints,
    GoogleTokenEndpoint,
    all_of,
    bearer,
    header,
    query_param,
)

GEMINI_MODEL = "gemini-2.5-pro"
DEPLOYMENT = "gpt-5-studio"


@pytest.fixture(autouse=True)
def _no_ambient_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what the spec hands over may count: the SDKs' own variables are cleared."""
    for name in ("GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_GENAI_USE_VERTEXAI",
                 "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "GOOGLE_VERTEX_BASE_URL",
                 "GOOGLE_API_KEY", "GEMINI_API_KEY", "AZURE_OPENAI_API_KEY",
                 "AZURE_OPENAI_AD_TOKEN", "AZURE_OPENAI_ENDPOINT", "OPENAI_API_VERSION",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def build(provider: str, mode: str, environ: dict[str, str], tmp_path: Path, *,
          model: str, codex_mode: str = "responses") -> ModelClient:
    engine = provider_profile(provider).build(EngineSpec(
        model=model, workspace=tmp_path, run_dir=tmp_path, environ=environ, auth_mode=mode,
        codex_mode=codex_mode))
    assert hasattr(engine, "complete")
    return engine  # type: ignore[return-value]


def complete(client: ModelClient, turns: int = 1) -> list[ModelResponse]:
    async def run() -> list[ModelResponse]:
        try:
            out = []
            for cycle in range(turns):
                out.append(await client.complete(ModelRequest(
                    system="s", messages=[Message(role=Role.USER, parts=[TextPart(text="hi")])],
                    tools=[], cycle=cycle)))
            return out
        finally:
            await client.aclose()
    return asyncio.run(run())


def vertex_env(server: CloudEndpoints, credentials: GoogleCredentials) -> dict[str, str]:
    return {"GOOGLE_CLOUD_PROJECT": PROJECT, "GOOGLE_CLOUD_LOCATION": VERTEX_REGION,
            "GOOGLE_VERTEX_BASE_URL": server.url,
            "GOOGLE_APPLICATION_CREDENTIALS": str(credentials.path)}


# An authorized-user file is refreshed at Google's fixed token endpoint (google-auth ignores its
# token_uri), so it cannot be pointed at a local server; these two kinds can.
@pytest.mark.parametrize("kind", ["service_account", "external_account"])
def test_gemini_on_vertex_sends_the_token_the_endpoint_issued(tmp_path: Path, kind: str) -> None:
    endpoint = GoogleTokenEndpoint()
    with CloudEndpoints(bearer(lambda: endpoint.issued), google_token=endpoint,
                        answers=["vertex one", "vertex two"]) as server:
        make = service_account_file if kind == "service_account" else external_account_file
        credentials = make(tmp_path, server)
        client = build("gemini", "vertex", vertex_env(server, credentials), tmp_path,
                       model=GEMINI_MODEL)
        replies = complete(client, turns=2)
    assert [r.message.parts[0].text for r in replies] == ["vertex one", "vertex two"]
    assert endpoint.refused == [] and server.refusals() == []
    assert len(endpoint.issued) == 1  # one token, reused while it is valid
    served = server.served("vertex_gemini")
    assert [r.path for r in served] == [
        f"/v1beta1/projects/{PROJECT}/locations/{VERTEX_REGION}/publishers/google/models/"
        f"{GEMINI_MODEL}:generateContent"] * 2
    for request in server.requests:
        wire = repr(request.headers) + request.body.decode("latin-1") + request.query
        if request.route != "google_token":
            assert not any(secret in wire for secret in credentials.secrets)


def test_gemini_on_vertex_with_a_token_the_endpoint_did_not_issue_is_refused(
        tmp_path: Path) -> None:
    endpoint = GoogleTokenEndpoint()
    with CloudEndpoints(bearer("ya29.some-other-token"), google_token=endpoint) as server:
        credentials = service_account_file(tmp_path, server)
        client = build("gemini", "vertex", vertex_env(server, credentials), tmp_path,
                       model=GEMINI_MODEL)
        with pytest.raises(ProviderError):
            complete(client)
    assert server.refusals() == [("vertex_gemini", "missing or wrong bearer token")]


def test_gemini_vertex_refuses_an_unusable_credentials_file(tmp_path: Path) -> None:
    bad = tmp_path / "creds.json"
    bad.write_text('{"type": "service_account", "private_key": "-----SECRET-MATERIAL"}')
    environ = {"GOOGLE_CLOUD_PROJECT": PROJECT, "GOOGLE_CLOUD_LOCATION": VERTEX_REGION,
               "GOOGLE_APPLICATION_CREDENTIALS": str(bad)}
    with pytest.raises(ConfigError) as caught:
        build("gemini", "vertex", environ, tmp_path, model=GEMINI_MODEL)
    assert "GOOGLE_APPLICATION_CREDENTIALS" in str(caught.value)
    assert "SECRET-MATERIAL" not in str(caught.value)


def azure_env(server: CloudEndpoints, **credential: str) -> dict[str, str]:
    return {"AZURE_OPENAI_ENDPOINT": server.url, "OPENAI_API_VERSION": API_VERSION,
            **credential}


@pytest.mark.parametrize("codex_mode", ["chat", "responses"])
def test_codex_on_azure_sends_the_api_key_to_the_deployment(tmp_path: Path,
                                                            codex_mode: str) -> None:
    auth = all_of(header("api-key", AZURE_KEY), query_param("api-version", API_VERSION))
    with CloudEndpoints(auth, answers=["azure says hi"]) as server:
        client = build("codex", "azure", azure_env(server, AZURE_OPENAI_API_KEY=AZURE_KEY),
                       tmp_path, model=DEPLOYMENT, codex_mode=codex_mode)
        [reply] = complete(client)
    assert reply.message.parts[0].text == "azure says hi" and server.refusals() == []
    [sent] = server.requests
    if codex_mode == "chat":
        assert sent.route == "azure_chat"
        assert sent.path == f"/openai/deployments/{DEPLOYMENT}/chat/completions"
    else:
        assert (sent.route, sent.path) == ("azure_responses", "/openai/responses")
    assert "authorization" not in sent.headers
    assert AZURE_KEY not in sent.body.decode() and AZURE_KEY not in sent.query


def test_codex_on_azure_with_an_entra_token(tmp_path: Path) -> None:
    auth = all_of(bearer(AZURE_AD_TOKEN), query_param("api-version", API_VERSION))
    with CloudEndpoints(auth) as server:
        client = build("codex", "azure", azure_env(server, AZURE_OPENAI_AD_TOKEN=AZURE_AD_TOKEN),
                       tmp_path, model=DEPLOYMENT, codex_mode="chat")
        complete(client)
    assert server.refusals() == [] and "api-key" not in server.requests[0].headers


def test_codex_on_azure_with_a_wrong_key_is_refused_and_the_key_not_echoed(
        tmp_path: Path) -> None:
    with CloudEndpoints(header("api-key", "the-right-key")) as server:
        client = build("codex", "azure", azure_env(server, AZURE_OPENAI_API_KEY=AZURE_KEY),
                       tmp_path, model=DEPLOYMENT, codex_mode="chat")
        with pytest.raises(ProviderError) as caught:
            complete(client)
    assert server.refusals() == [("azure_chat", "wrong api-key header")]
    assert AZURE_KEY not in str(caught.value) and AZURE_KEY not in repr(caught.value.details)


def test_codex_on_azure_with_an_entra_token_the_endpoint_does_not_accept_is_refused(
        tmp_path: Path) -> None:
    """The control of the Entra test above: the endpoint's bearer check does refuse a token it
    was not given, so that test's empty refusals mean the token matched. (There is no Entra
    token acquisition to exercise: the product takes a token issued elsewhere, as given,
    ``docs/sphinx/cloud_auth.rst``.)"""
    with CloudEndpoints(bearer("another-entra-token")) as server:
        client = build("codex", "azure", azure_env(server, AZURE_OPENAI_AD_TOKEN=AZURE_AD_TOKEN),
                       tmp_path, model=DEPLOYMENT, codex_mode="chat")
        with pytest.raises(ProviderError) as caught:
            complete(client)
    assert server.refusals() == [("azure_chat", "missing or wrong bearer token")]
    assert AZURE_AD_TOKEN not in str(caught.value)
    assert AZURE_AD_TOKEN not in repr(caught.value.details)
