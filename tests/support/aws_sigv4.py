"""AWS Signature Version 4, recomputed on the receiving side (what AWS itself does on a request).

Stands for the signature check of Amazon Bedrock, Claude Platform on AWS (or any SigV4 service):
:func:`verify` rebuilds the canonical request from what arrived on the wire, derives the signing
key from the secret the test knows and compares signatures. It answers the reason a request is
refused, or ``None`` when it is correctly signed for the expected key id, region and service
(and, when given, session token). The signature must cover the body: ``UNSIGNED-PAYLOAD`` (and
the streaming variants) are refused, so a request whose body was changed after signing never
verifies. Written from the published algorithm; no AWS SDK involved.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote

ALGORITHM = "AWS4-HMAC-SHA256"
_AUTH = re.compile(
    r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/,\s]+)/(?P<date>\d{8})/(?P<region>[^/]+)/"
    r"(?P<service>[^/]+)/aws4_request,\s*SignedHeaders=(?P<signed>[a-z0-9;.\-_]+),\s*"
    r"Signature=(?P<signature>[0-9a-f]{64})$"
)


@dataclass(frozen=True)
class SigV4Key:
    """What the receiving side knows: the key pair, and where the request must be scoped."""

    access_key_id: str
    secret_access_key: str
    region: str
    service: str
    session_token: str | None = None


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def signing_key(secret: str, date: str, region: str, service: str) -> bytes:
    key = _hmac(("AWS4" + secret).encode(), date)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    return key


def _encode(value: str) -> str:
    return quote(value, safe="-_.~")


def canonical_request(method: str, path: str, query: str, headers: Mapping[str, str],
                      signed: list[str], payload_hash: str) -> str:
    # Services other than S3 sign the path as sent, URI-encoded once more.
    uri = quote(path or "/", safe="/-_.~")
    pairs = sorted((_encode(k), _encode(v)) for k, v in parse_qsl(query, keep_blank_values=True))
    canonical_query = "&".join(f"{k}={v}" for k, v in pairs)
    lines = [f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed]
    return "\n".join([method, uri, canonical_query, "".join(lines), ";".join(signed),
                      payload_hash])


def verify(key: SigV4Key, method: str, path: str, query: str, headers: Mapping[str, str],
           body: bytes) -> str | None:
    """``None`` when the request is signed correctly with ``key``, else why not."""
    lowered = {name.lower(): value for name, value in headers.items()}
    match = _AUTH.match(lowered.get("authorization", "").strip())
    if match is None:
        return "no SigV4 authorization header"
    if match["key"] != key.access_key_id:
        return f"unknown access key id {match['key']!r}"
    if (match["region"], match["service"]) != (key.region, key.service):
        return f"scope {match['region']}/{match['service']} is not {key.region}/{key.service}"
    amz_date = lowered.get("x-amz-date", "")
    if not amz_date.startswith(match["date"]):
        return "x-amz-date does not match the credential scope date"
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    if key.session_token is not None:
        if lowered.get("x-amz-security-token") != key.session_token:
            return "missing or wrong session token"
        if "x-amz-security-token" not in signed:
            return "the session token is not signed"
    body_hash = hashlib.sha256(body).hexdigest()
    declared = lowered.get("x-amz-content-sha256")
    if declared is not None and declared.startswith(("UNSIGNED-", "STREAMING-")):
        # S3 accepts these; the model APIs are signed over the body, so must the tests be
        return f"x-amz-content-sha256 {declared}: the body is not bound by the signature"
    if declared is not None and declared != body_hash:
        return "x-amz-content-sha256 does not match the body"
    payload_hash = body_hash
    request = canonical_request(method, path, query, lowered, signed, payload_hash)
    scope = f"{match['date']}/{key.region}/{key.service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, amz_date, scope,
                         hashlib.sha256(request.encode()).hexdigest()])
    expected = hmac.new(signing_key(key.secret_access_key, match["date"], key.region,
                                    key.service), to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, match["signature"]):
        return "signature mismatch"
    return None
