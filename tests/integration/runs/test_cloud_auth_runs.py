"""A whole ``studio run`` per cloud auth mode (the real CLI process, a real database): the run
succeeds through the local cloud endpoints, and no key material (the static secret, the web
identity token, the STS session, the service account's private key, the access token, the
Azure key) appears in its output, its logs, its run directory, its journal or any database row."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from services.db.session import Database, create_db_engine
from tests.integration.db.helpers import all_rows_text
from tests.integration.providers.cloud_fixtures import (
    API_VERSION,
    AZURE_KEY,
    PROJECT,
    REGION,
    ROLE_ARN,
    VERTEX_REGION,
    WEB_IDENTITY_TOKEN,
    service_account_file,
    web_identity_sts,
    write_token_file,
)
from tests.integration.runs.cli_runs import last_json, studio, studio_env
from tests.support.cloud_endpoints import (
    CloudEndpoints,
    GoogleTokenEndpoint,
    all_of,
    bearer,
    header,
    query_param,
    sigv4,
)

DONE = json.dumps({"status": "success", "summary": "done"})
Setup = Callable[[CloudEndpoints, Path], tuple[dict[str, str], list[str]]]


def claude_web_identity(server: CloudEndpoints, tmp: Path) -> tuple[dict[str, str], list[str]]:
    token = write_token_file(tmp)
    return ({"STUDIO_CLAUDE_AUTH": "bedrock_web_identity", "AWS_REGION": REGION,
             "ANTHROPIC_BEDROCK_BASE_URL": server.url, "AWS_ROLE_ARN": ROLE_ARN,
             "AWS_WEB_IDENTITY_TOKEN_FILE": str(token), "AWS_ENDPOINT_URL_STS": server.url},
            [WEB_IDENTITY_TOKEN])


def gemini_vertex(server: CloudEndpoints, tmp: Path) -> tuple[dict[str, str], list[str]]:
    credentials = service_account_file(tmp, server)
    return ({"STUDIO_GEMINI_AUTH": "vertex", "GOOGLE_CLOUD_PROJECT": PROJECT,
             "GOOGLE_CLOUD_LOCATION": VERTEX_REGION, "GOOGLE_VERTEX_BASE_URL": server.url,
             "GOOGLE_APPLICATION_CREDENTIALS": str(credentials.path)}, credentials.secrets)


def codex_azure(server: CloudEndpoints, tmp: Path) -> tuple[dict[str, str], list[str]]:
    return ({"STUDIO_CODEX_AUTH": "azure", "AZURE_OPENAI_ENDPOINT": server.url,
             "OPENAI_API_VERSION": API_VERSION, "AZURE_OPENAI_API_KEY": AZURE_KEY}, [AZURE_KEY])


def test_a_cloud_run_leaves_no_key_material_anywhere(db_url: str, tmp_path: Path,
                                                     case: str) -> None:
    provider, model, setup = CASES[case]
    sts = web_identity_sts("bedrock")
    google = GoogleTokenEndpoint()
    auth = {
        "claude": sigv4(sts.latest),
        "gemini": bearer(lambda: google.issued),
        "codex": all_of(header("api-key", AZURE_KEY), query_param("api-version", API_VERSION)),
    }[provider]
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with CloudEndpoints(auth, fallback=DONE, sts=sts, google_token=google) as server:
        extra, secrets = setup(server, tmp_path)
        env = {k: v for k, v in studio_env(db_url, tmp_path).items()
               if not k.startswith(("AWS_", "AZURE_", "CLAUDE_CODE_"))
               and k not in ("OPENAI_API_KEY", "OPENAI_API_VERSION")}
        env.update(extra, STUDIO_LOG_LEVEL="INFO")
        proc = studio(env, "run", "--workspace", str(workspace), "--provider", provider,
                      "--model", model, "--json", "Say done.", timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        execution_id = last_json(proc.stdout)["execution_id"]
        logs = studio(env, "executions", "logs", execution_id)
        shown = studio(env, "executions", "show", execution_id, "--json")
    assert server.refusals() == []
    assert [r for r in server.requests if r.route not in ("sts", "google_token", "unknown")]
    secrets += [key.secret_access_key for key in sts.issued]
    secrets += [key.session_token or "" for key in sts.issued] + google.issued
    assert all(secrets), "every secret of the case is known"
    db = Database(create_db_engine(db_url))
    try:
        places = {"stdout": proc.stdout, "stderr": proc.stderr, "logs": logs.stdout + logs.stderr,
                  "show": shown.stdout, "database": all_rows_text(db)}
    finally:
        db.dispose()
    # every file the run could write: its data dir, the workspace, home (not the credential
    # files the test itself wrote for the SDKs to read)
    given = {"google-credentials.json", "web-identity-token"}
    for path in tmp_path.rglob("*"):
        if path.is_file() and path.name not in given:
            places[str(path)] = path.read_text(errors="replace")
    leaks = [(where, n) for where, content in places.items()
             for n, secret in enumerate(secrets) if secret in content]
    assert leaks == []
    assert execution_id in places["database"]


CASES: dict[str, tuple[str, str, Setup]] = {
    "claude-bedrock-web-identity": ("claude", "claude-sonnet-4-5", claude_web_identity),
    "gemini-vertex": ("gemini", "gemini-2.5-pro", gemini_vertex),
    "codex-azure": ("codex", "gpt-5-studio", codex_azure),
}


@pytest.fixture(params=sorted(CASES))
def case(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


