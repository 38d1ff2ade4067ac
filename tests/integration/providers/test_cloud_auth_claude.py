"""claude through Amazon Bedrock, Claude Platform on AWS and Google Vertex AI: the real Claude Code
CLI (bundled with claude-agent-sdk), built the way the composition root builds it for each
``STUDIO_CLAUDE_AUTH`` mode, against :mod:`tests.support.cloud_endpoints`, which recomputes the
SigV4 signatures (service ``bedrock`` or ``aws-external-anthropic``) with the secret it knows,
answers STS ``AssumeRoleWithWebIdentity`` and Google's token exchange, and refuses anything that
does not verify."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from services.execution.errors import ProviderError
from services.execution.providers.profiles import EngineSpec, provider_profile
from tests.integration.providers.cloud_fixtures import (
    ACCESS_KEY_ID,
    PROJECT,
    REGION,
    ROLE_ARN,
    SECRET_ACCESS_KEY,
    VERTEX_REGION,
    WEB_IDENTITY_TOKEN,
    WORKSPACE_ID,
    external_account_file,
    static_key,
    web_identity_sts,
    write_token_file,
)
from tests.integration.providers.test_claude_engine import READ, RecordingGateway
from tests.support.aws_sigv4 import SigV4Key
from tests.support.cloud_endpoints import (
    CloudEndpoints,
    CloudRequest,
    GoogleTokenEndpoint,
    all_of,
    bearer,
    header,
    sigv4,
)

MODEL = "claude-sonnet-4-5"


def run_claude(mode: str, environ: dict[str, str], tmp_path: Path) -> Any:
    workspace, run_dir = tmp_path / "ws", tmp_path / "run"
    workspace.mkdir()
    run_dir.mkdir()
    spec = EngineSpec(model=MODEL, workspace=workspace, run_dir=run_dir,
                      environ={"PATH": os.environ["PATH"], **environ}, auth_mode=mode)
    engine = provider_profile("claude").build(spec)
    return asyncio.run(engine.run_session(  # type: ignore[union-attr]
        system="You are a test agent.", prompt="Say done.", tools=[READ],
        gateway=RecordingGateway(), max_turns=3, max_budget_usd=1.0))


def assert_secrets_never_sent(requests: list[CloudRequest], *secrets: str) -> None:
    for request in requests:
        wire = request.path + request.query + repr(request.headers) + request.body.decode("latin-1")
        for secret in secrets:
            assert secret not in wire, f"a secret travelled in {request.route} {request.path}"


def assert_body_signed(requests: list[CloudRequest]) -> None:
    """Each SigV4 request signed its body: no ``x-amz-content-sha256`` (the verifier hashes the
    body it received) or the body's own hash, never ``UNSIGNED-PAYLOAD`` (which the verifier
    refuses too: this names what the CLI sends)."""
    assert requests
    for request in requests:
        declared = request.headers.get("x-amz-content-sha256")
        assert declared in (None, hashlib.sha256(request.body).hexdigest()), (request.path,
                                                                                declared)


def assert_transcripts_clean(tmp_path: Path, *secrets: str) -> None:
    for path in (tmp_path / "run").rglob("*"):
        if path.is_file():
            content = path.read_text(errors="replace")
            assert not any(secret in content for secret in secrets), path


def test_bedrock_with_static_keys_is_signed_for_bedrock(tmp_path: Path) -> None:
    with CloudEndpoints(sigv4(static_key("bedrock")), fallback="bedrock says hi") as server:
        outcome = run_claude("bedrock", {
            "AWS_REGION": REGION, "ANTHROPIC_BEDROCK_BASE_URL": server.url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }, tmp_path)
    assert outcome.final_text == "bedrock says hi" and outcome.stop_reason == "end_turn"
    assert server.refusals() == []
    streamed = [r for r in server.served("bedrock") if r.path.endswith("-stream")]
    assert [r.path for r in streamed] == [f"/model/{MODEL}/invoke-with-response-stream"]
    assert ACCESS_KEY_ID in streamed[0].headers["authorization"]
    assert_body_signed(server.served("bedrock"))
    assert_secrets_never_sent(server.requests, SECRET_ACCESS_KEY)
    assert_transcripts_clean(tmp_path, SECRET_ACCESS_KEY)


def test_bedrock_through_web_identity_signs_with_the_sts_session(tmp_path: Path) -> None:
    sts = web_identity_sts("bedrock")
    token_file = write_token_file(tmp_path)
    with CloudEndpoints(sigv4(sts.latest), sts=sts) as server:
        outcome = run_claude("bedrock_web_identity", {
            "AWS_REGION": REGION, "ANTHROPIC_BEDROCK_BASE_URL": server.url,
            "AWS_ROLE_ARN": ROLE_ARN, "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file),
            "AWS_ENDPOINT_URL_STS": server.url,
        }, tmp_path)
    assert outcome.final_text == "done" and server.refusals() == []
    [assumed] = [r for r in server.requests if r.route == "sts"]
    assert b"Action=AssumeRoleWithWebIdentity" in assumed.body
    assert sts.issued, "STS issued no credentials"
    issued = sts.issued[0]
    streamed = [r for r in server.served("bedrock") if r.path.endswith("-stream")]
    assert streamed and all(r.headers["x-amz-security-token"] == issued.session_token
                            for r in streamed)
    # the web identity token goes to STS only; the temporary secret never travels
    assert_secrets_never_sent(server.served("bedrock"), WEB_IDENTITY_TOKEN,
                              issued.secret_access_key)
    assert_transcripts_clean(tmp_path, WEB_IDENTITY_TOKEN, issued.secret_access_key,
                             issued.session_token or "")


def test_claude_platform_on_aws_is_signed_for_aws_external_anthropic(tmp_path: Path) -> None:
    auth = all_of(sigv4(static_key("aws-external-anthropic")),
                  header("anthropic-workspace-id", WORKSPACE_ID))
    with CloudEndpoints(auth) as server:
        outcome = run_claude("anthropic_aws", {
            "AWS_REGION": REGION, "ANTHROPIC_AWS_BASE_URL": server.url,
            "ANTHROPIC_AWS_WORKSPACE_ID": WORKSPACE_ID,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }, tmp_path)
    assert outcome.final_text == "done" and server.refusals() == []
    assert_body_signed(server.served("anthropic_aws"))
    assert_secrets_never_sent(server.requests, SECRET_ACCESS_KEY)


def test_claude_platform_on_aws_through_web_identity(tmp_path: Path) -> None:
    sts = web_identity_sts("aws-external-anthropic")
    token_file = write_token_file(tmp_path)
    with CloudEndpoints(sigv4(sts.latest), sts=sts) as server:
        outcome = run_claude("anthropic_aws_web_identity", {
            "AWS_REGION": REGION, "ANTHROPIC_AWS_BASE_URL": server.url,
            "ANTHROPIC_AWS_WORKSPACE_ID": WORKSPACE_ID, "AWS_ROLE_ARN": ROLE_ARN,
            "AWS_WEB_IDENTITY_TOKEN_FILE": str(token_file), "AWS_ENDPOINT_URL_STS": server.url,
        }, tmp_path)
    assert outcome.final_text == "done" and server.refusals() == []
    assert server.served("anthropic_aws") and server.served("anthropic_aws")[0].headers[
        "x-amz-security-token"] == sts.issued[0].session_token


def test_vertex_with_workload_identity_federation_sends_the_issued_bearer(tmp_path: Path) -> None:
    endpoint = GoogleTokenEndpoint()
    with CloudEndpoints(bearer(lambda: endpoint.issued), google_token=endpoint) as server:
        credentials = external_account_file(tmp_path, server)
        outcome = run_claude("vertex", {
            "ANTHROPIC_VERTEX_BASE_URL": server.url + "/v1",
            "ANTHROPIC_VERTEX_PROJECT_ID": PROJECT, "CLOUD_ML_REGION": VERTEX_REGION,
            "GOOGLE_APPLICATION_CREDENTIALS": str(credentials.path),
        }, tmp_path)
    assert outcome.final_text == "done" and server.refusals() == []
    assert endpoint.issued and endpoint.refused == []
    streamed = [r for r in server.served("vertex_anthropic")
                if r.path.endswith(":streamRawPredict")]
    assert streamed and streamed[0].path == (
        f"/v1/projects/{PROJECT}/locations/{VERTEX_REGION}/publishers/anthropic/models/"
        f"{MODEL}:streamRawPredict")
    assert_secrets_never_sent(server.served("vertex_anthropic"), *credentials.secrets)


def test_a_wrong_secret_is_refused_by_the_endpoint_and_fails_the_session(tmp_path: Path) -> None:
    expected = SigV4Key(ACCESS_KEY_ID, "another-secret-the-server-knows", REGION, "bedrock")
    with CloudEndpoints(sigv4(expected)) as server, pytest.raises(ProviderError):
        run_claude("bedrock", {
            "AWS_REGION": REGION, "ANTHROPIC_BEDROCK_BASE_URL": server.url,
            "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        }, tmp_path)
    assert ("bedrock", "signature mismatch") in server.refusals()
    assert not server.served("bedrock")


def test_bedrock_with_a_bedrock_api_key_sends_it_as_bearer_only(tmp_path: Path) -> None:
    api_key = "ABSKQmVkcm9ja0FQSUtleS1zdHVkaW8tdGVzdA=="
    with CloudEndpoints(bearer(api_key)) as server:
        outcome = run_claude("bedrock", {
            "AWS_REGION": REGION, "ANTHROPIC_BEDROCK_BASE_URL": server.url,
            "AWS_BEARER_TOKEN_BEDROCK": api_key,
        }, tmp_path)
    assert outcome.final_text == "done" and server.refusals() == []
    streamed = [r for r in server.served("bedrock") if r.path.endswith("-stream")]
    assert streamed and "x-amz-date" not in streamed[0].headers  # no SigV4 at all
    for request in server.requests:
        assert api_key not in request.body.decode("latin-1") + request.query
    assert_transcripts_clean(tmp_path, api_key)
