"""SDK clients of the cloud auth modes (:mod:`.cloud_auth`), built from the values the composition
root hands over (the engine reads no environment).

- Azure OpenAI: the ``openai`` SDK's ``AsyncAzureOpenAI`` with the endpoint, the api-version and
  an ``api-key`` or a Microsoft Entra ID token; the run's model is the deployment name (Chat
  Completions go to ``/openai/deployments/{deployment}/chat/completions``, Responses to
  ``/openai/responses``, both with ``?api-version=``);
- Vertex AI for ``google-genai``: the project, the location, an optional base URL and the
  application default credentials loaded from the file ``GOOGLE_APPLICATION_CREDENTIALS`` names
  (a service account, an authorized user, or an external account for workload identity
  federation).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.execution.errors import ConfigError

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"


def azure_openai_client(environ: Mapping[str, str], *, deployment: str,
                        timeout_s: float = 300.0) -> Any:
    """An ``openai.AsyncAzureOpenAI`` for ``deployment`` (retries off: the loop retries)."""
    import openai

    api_key = environ.get("AZURE_OPENAI_API_KEY") or None
    token = environ.get("AZURE_OPENAI_AD_TOKEN") or None
    try:
        return openai.AsyncAzureOpenAI(
            azure_endpoint=environ["AZURE_OPENAI_ENDPOINT"],
            api_version=environ["OPENAI_API_VERSION"],
            azure_deployment=deployment,
            api_key=api_key,
            azure_ad_token=None if api_key else token,
            max_retries=0, timeout=timeout_s,
        )
    except (KeyError, openai.OpenAIError) as exc:
        raise ConfigError("STUDIO_CODEX_AUTH=azure: cannot build the Azure OpenAI client "
                          f"({type(exc).__name__})") from exc


@dataclass(frozen=True)
class VertexTarget:
    """Where and as whom ``google-genai`` calls Vertex AI."""

    project: str
    location: str
    credentials: Any  # google.auth.credentials.Credentials
    base_url: str | None = None


def vertex_target(environ: Mapping[str, str]) -> VertexTarget:
    """The Vertex AI project, location and credentials of the gemini ``vertex`` mode."""
    from google.auth import exceptions as auth_exceptions

    path = environ.get("GOOGLE_APPLICATION_CREDENTIALS", "")
    try:
        credentials = _load_credentials(path)
    except (auth_exceptions.DefaultCredentialsError, OSError, ValueError) as exc:
        # the library's message may quote the file: keep only what kind of failure it was
        raise ConfigError("STUDIO_GEMINI_AUTH=vertex: GOOGLE_APPLICATION_CREDENTIALS does not "
                          f"name a usable credentials file ({type(exc).__name__})") from exc
    if credentials is None:
        raise ConfigError("STUDIO_GEMINI_AUTH=vertex: GOOGLE_APPLICATION_CREDENTIALS does not "
                          "name a usable credentials file")
    return VertexTarget(project=environ["GOOGLE_CLOUD_PROJECT"],
                        location=environ["GOOGLE_CLOUD_LOCATION"], credentials=credentials,
                        base_url=environ.get("GOOGLE_VERTEX_BASE_URL") or None)


def _load_credentials(path: str) -> Any:
    """The credentials of the file at ``path``. A workload identity federation file
    (``external_account`` with a file or URL source) is read without the library's project
    lookup, which would call the Resource Manager API at build time: the project is known."""
    import google.auth
    from google.auth import identity_pool

    with open(path, encoding="utf-8") as handle:
        info = json.load(handle)
    if not isinstance(info, dict):
        raise ValueError("not a JSON object")
    source = info.get("credential_source")
    if (info.get("type") == "external_account" and isinstance(source, dict)
            and ("file" in source or "url" in source)):
        return identity_pool.Credentials.from_info(  # type: ignore[no-untyped-call]
            info, scopes=[CLOUD_PLATFORM_SCOPE])
    credentials, _ = google.auth.load_credentials_from_dict(  # type: ignore[no-untyped-call]
        info, scopes=[CLOUD_PLATFORM_SCOPE])
    return credentials
