"""The SigV4 verifier of the fake cloud endpoints, against AWS's published examples: it must
accept a correct signature and refuse any change to what was signed."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from tests.support.aws_sigv4 import (
    ALGORITHM,
    SigV4Key,
    canonical_request,
    signing_key,
    verify,
)

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
KEY = SigV4Key("AKIDEXAMPLE", SECRET, "us-east-1", "service")
# AWS SigV4 test suite, "get-vanilla"
HEADERS = {
    "Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z",
    "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/"
                     "aws4_request, SignedHeaders=host;x-amz-date, Signature="
                     "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
}


def test_the_derived_signing_key_is_the_documented_one() -> None:
    assert signing_key(SECRET, "20120215", "us-east-1", "iam").hex() == (
        "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d")


def test_the_published_request_verifies() -> None:
    assert verify(KEY, "GET", "/", "", HEADERS, b"") is None


@pytest.mark.parametrize(("method", "path", "query", "body", "headers", "reason"), [
    ("POST", "/", "", b"", {}, "signature mismatch"),
    ("GET", "/other", "", b"", {}, "signature mismatch"),
    ("GET", "/", "a=1", b"", {}, "signature mismatch"),
    ("GET", "/", "", b"tampered", {}, "signature mismatch"),
    ("GET", "/", "", b"", {"Host": "evil.example.com"}, "signature mismatch"),
    ("GET", "/", "", b"", {"X-Amz-Date": "20150831T123600Z"}, "x-amz-date does not match"),
])
def test_any_change_is_refused(method: str, path: str, query: str, body: bytes,
                               headers: dict[str, str], reason: str) -> None:
    found = verify(KEY, method, path, query, {**HEADERS, **headers}, body)
    assert found is not None and found.startswith(reason)


def test_the_wrong_secret_service_region_or_session_is_refused() -> None:
    assert verify(SigV4Key("AKIDEXAMPLE", "other", "us-east-1", "service"), "GET", "/", "",
                  HEADERS, b"") == "signature mismatch"
    assert verify(SigV4Key("AKIDEXAMPLE", SECRET, "us-east-1", "bedrock"), "GET", "/", "",
                  HEADERS, b"") is not None
    assert verify(SigV4Key("AKIDEXAMPLE", SECRET, "eu-west-1", "service"), "GET", "/", "",
                  HEADERS, b"") is not None
    with_session = SigV4Key("AKIDEXAMPLE", SECRET, "us-east-1", "service", session_token="t")
    assert verify(with_session, "GET", "/", "", HEADERS, b"") == "missing or wrong session token"


def _signed(method: str, path: str, headers: dict[str, str], payload_hash: str) -> str:
    """The Authorization header a signer gives ``headers`` (all signed) with ``payload_hash``."""
    date = headers["X-Amz-Date"]
    lowered = {k.lower(): v for k, v in headers.items()}
    names = sorted(lowered)
    request = canonical_request(method, path, "", lowered, names, payload_hash)
    scope = f"{date[:8]}/us-east-1/service/aws4_request"
    to_sign = "\n".join([ALGORITHM, date, scope, hashlib.sha256(request.encode()).hexdigest()])
    signature = hmac.new(signing_key(SECRET, date[:8], "us-east-1", "service"),
                         to_sign.encode(), hashlib.sha256).hexdigest()
    return (f"{ALGORITHM} Credential=AKIDEXAMPLE/{scope}, SignedHeaders={';'.join(names)}, "
            f"Signature={signature}")


BODY = b'{"prompt": "hello"}'


def test_a_body_signed_through_its_hash_header_verifies_and_binds_the_body() -> None:
    """The control of the test below: a correctly signed body (declared or not) verifies, and
    the same signature over another body does not."""
    for declared in (True, False):
        headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z"}
        if declared:
            headers["X-Amz-Content-Sha256"] = hashlib.sha256(BODY).hexdigest()
        headers["Authorization"] = _signed("POST", "/", headers,
                                           hashlib.sha256(BODY).hexdigest())
        assert verify(KEY, "POST", "/", "", headers, BODY) is None
        assert verify(KEY, "POST", "/", "", headers, b'{"prompt": "other"}') is not None


@pytest.mark.parametrize("declared", ["UNSIGNED-PAYLOAD", "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
                                      "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"])
def test_an_unsigned_payload_is_refused_whatever_the_body(declared: str) -> None:
    """Signed correctly over ``declared`` instead of the body's hash: a real signer's output,
    but the body is not bound (any body would pass), so it is refused."""
    headers = {"Host": "example.amazonaws.com", "X-Amz-Date": "20150830T123600Z",
               "X-Amz-Content-Sha256": declared}
    headers["Authorization"] = _signed("POST", "/", headers, declared)
    for body in (BODY, b"anything else"):
        found = verify(KEY, "POST", "/", "", headers, body)
        assert found is not None and "not bound" in found, found
