"""Credentials and environments of the cloud auth modes, for tests against
:mod:`tests.support.cloud_endpoints` (all values are test-only)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.aws_sigv4 import SigV4Key
from tests.support.cloud_endpoints import (
    CloudEndpoints,
    GoogleTokenEndpoint,
    WebIdentitySts,
    new_service_account_key,
)

REGION = "eu-west-1"
ACCESS_KEY_ID = "AKIAIOSFODNN7STUDIO1"
SECRET_ACCESS_KEY = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYSTUDIOSECRET1"
ROLE_ARN = "arn:aws:iam::123456789012:role/studio-executor"
WEB_IDENTITY_TOKEN = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2EifQ.k8s-projected-SIGNATURE-77"
WORKSPACE_ID = "wrkspc_01studio"
PROJECT = "studio-test-project"
VERTEX_REGION = "europe-west1"
SERVICE_ACCOUNT = "studio-runner@studio-test-project.iam.gserviceaccount.com"
FEDERATION_AUDIENCE = ("//iam.googleapis.com/projects/123/locations/global/"
                       "workloadIdentityPools/studio/providers/kubernetes")
AZURE_KEY = "3f9c2b7e5a1d4c8f9e0b6a2d7c4e1f3a"
AZURE_AD_TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.entra-ACCESS-token.sig"
API_VERSION = "2024-10-21"


def static_key(service: str) -> SigV4Key:
    return SigV4Key(ACCESS_KEY_ID, SECRET_ACCESS_KEY, REGION, service)


def web_identity_sts(service: str) -> WebIdentitySts:
    return WebIdentitySts(role_arn=ROLE_ARN, web_identity_token=WEB_IDENTITY_TOKEN,
                          region=REGION, service=service)


def write_token_file(directory: Path) -> Path:
    path = directory / "web-identity-token"
    path.write_text(WEB_IDENTITY_TOKEN)
    return path


@dataclass
class GoogleCredentials:
    """A credentials file for ``GOOGLE_APPLICATION_CREDENTIALS`` and the endpoint accepting it."""

    path: Path
    endpoint: GoogleTokenEndpoint
    secrets: list[str] = field(default_factory=list)  # what must never leave the file


def service_account_file(directory: Path, server: CloudEndpoints) -> GoogleCredentials:
    """A service-account key file whose ``token_uri`` is ``server``'s token endpoint."""
    key, pem = new_service_account_key()
    assert server.google_token is not None
    endpoint = server.google_token
    endpoint.service_account_email = SERVICE_ACCOUNT
    endpoint.public_key = key.public_key()
    endpoint.audience = "https://oauth2.googleapis.com/token"  # what Google itself checks
    data = {"type": "service_account", "project_id": PROJECT, "private_key_id": "kid-1",
            "private_key": pem, "client_email": SERVICE_ACCOUNT, "client_id": "1047",
            "token_uri": server.url + "/token"}
    return _write(directory, data, endpoint, [pem.splitlines()[1]])


def external_account_file(directory: Path, server: CloudEndpoints) -> GoogleCredentials:
    """Workload identity federation: a projected service-account token exchanged at the STS
    (``token_url``) for an access token."""
    assert server.google_token is not None
    endpoint = server.google_token
    subject = write_token_file(directory)
    endpoint.subject_token, endpoint.federation_audience = WEB_IDENTITY_TOKEN, FEDERATION_AUDIENCE
    data = {"type": "external_account", "audience": FEDERATION_AUDIENCE,
            "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
            "token_url": server.url + "/token", "credential_source": {"file": str(subject)}}
    return _write(directory, data, endpoint, [WEB_IDENTITY_TOKEN])


def _write(directory: Path, data: dict[str, object], endpoint: GoogleTokenEndpoint,
           secrets: list[str]) -> GoogleCredentials:
    path = directory / "google-credentials.json"
    path.write_text(json.dumps(data))
    path.chmod(0o600)
    return GoogleCredentials(path=path, endpoint=endpoint, secrets=secrets)
