"""Cloud model endpoints on 127.0.0.1 that check auth the way the real services do.

One server stands for whichever cloud a test needs:

- **Amazon Bedrock** runtime: ``POST /model/{model}/invoke-with-response-stream`` (the
  Anthropic SSE events wrapped in AWS event-stream frames, as Bedrock sends them) and
  ``/model/{model}/invoke``;
- **Claude Platform on AWS** (``aws-external-anthropic``): ``POST /v1/messages``;
- **AWS STS**: ``POST /`` with ``Action=AssumeRoleWithWebIdentity`` (form encoded), which checks
  the role ARN and the web identity token and answers temporary credentials (XML);
- **Google Vertex AI**: Anthropic models' ``:rawPredict`` / ``:streamRawPredict`` and Gemini's
  ``:generateContent`` under ``/{v1,v1beta1}/projects/{p}/locations/{l}/publishers/...``;
- **Google OAuth token endpoint**: ``POST /token``, a service account's RS256 JWT assertion
  (signature checked with the account's public key) or an authorized user's refresh token;
  it issues an access token the model routes then require as ``Bearer``;
- **Azure OpenAI**: ``/openai/deployments/{deployment}/chat/completions`` and
  ``/openai/responses``, with the ``api-version`` query parameter required.

Model routes refuse (403, reason in ``refused``) any request whose auth does not verify; every
request is recorded in ``requests``. Replies are the scripted model server's renderings (text only:
each model request takes the next answer, then ``fallback``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from tests.support import aws_sigv4
from tests.support.model_replies import HttpReply, render
from tests.support.model_requests import RequestRecord
from tests.support.model_script import text

_BEDROCK = re.compile(r"^/model/(?P<model>[^/]+)/(?P<api>invoke-with-response-stream|invoke)$")
_VERTEX = re.compile(r"^/(?:v1|v1beta1)/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
                     r"/publishers/(?P<publisher>anthropic|google)/models/(?P<model>[^/:]+)"
                     r":(?P<api>[A-Za-z]+)$")
_AZURE_DEPLOYMENT = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_AZURE_RESPONSES = {"/openai/responses", "/openai/v1/responses"}


@dataclass(frozen=True)
class CloudRequest:
    """One request as received: ``route`` names what it was taken for."""

    route: str  # bedrock, anthropic_aws, vertex_anthropic, vertex_gemini, azure_chat,
    # azure_responses, sts, google_token, unknown
    method: str
    path: str
    query: str
    headers: Mapping[str, str]
    body: bytes
    refused: str | None = None  # why auth failed; None when it verified


# ---------------------------------------------------------------- auth schemes


Verifier = Callable[[CloudRequest], "str | None"]


def sigv4(key: aws_sigv4.SigV4Key | Callable[[], aws_sigv4.SigV4Key | None]) -> Verifier:
    """SigV4 with ``key`` (or with what a callable gives at request time: STS-issued keys)."""

    def check(request: CloudRequest) -> str | None:
        current = key() if callable(key) else key
        if current is None:
            return "no credentials were issued yet"
        return aws_sigv4.verify(current, request.method, request.path, request.query,
                                request.headers, request.body)

    return check


def bearer(token: str | Callable[[], Iterable[str]]) -> Verifier:
    """``Authorization: Bearer <token>`` (or one of the tokens a callable lists)."""

    def check(request: CloudRequest) -> str | None:
        allowed = [token] if isinstance(token, str) else list(token())
        sent = request.headers.get("authorization", "")
        if not allowed:
            return "no token was issued yet"
        if not any(sent == f"Bearer {value}" for value in allowed):
            return "missing or wrong bearer token"
        return None

    return check


def header(name: str, value: str) -> Verifier:
    def check(request: CloudRequest) -> str | None:
        return None if request.headers.get(name.lower()) == value else f"wrong {name} header"

    return check


def query_param(name: str, value: str) -> Verifier:
    def check(request: CloudRequest) -> str | None:
        found = parse_qs(request.query).get(name)
        return None if found == [value] else f"query parameter {name} must be {value!r}"

    return check


def all_of(*checks: Verifier) -> Verifier:
    def check(request: CloudRequest) -> str | None:
        for one in checks:
            reason = one(request)
            if reason is not None:
                return reason
        return None

    return check


# ---------------------------------------------------------------- STS and Google OAuth


@dataclass
class WebIdentitySts:
    """AssumeRoleWithWebIdentity: the role and token it accepts, the keys it hands out."""

    role_arn: str
    web_identity_token: str
    region: str
    service: str = "bedrock"
    issued: list[aws_sigv4.SigV4Key] = field(default_factory=list)

    def latest(self) -> aws_sigv4.SigV4Key | None:
        return self.issued[-1] if self.issued else None

    def answer(self, form: Mapping[str, list[str]]) -> HttpReply:
        def one(name: str) -> str:
            return (form.get(name) or [""])[0]

        if one("Action") != "AssumeRoleWithWebIdentity":
            return _sts_error(400, "InvalidAction", "unsupported action")
        if one("RoleArn") != self.role_arn:
            return _sts_error(403, "AccessDenied", "not authorized to assume this role")
        if one("WebIdentityToken") != self.web_identity_token:
            return _sts_error(400, "InvalidIdentityToken", "the web identity token is invalid")
        key = aws_sigv4.SigV4Key(
            access_key_id="ASIA" + secrets.token_hex(8).upper(),
            secret_access_key=secrets.token_urlsafe(30), region=self.region,
            service=self.service, session_token="FwoSTS" + secrets.token_urlsafe(40))
        self.issued.append(key)
        expiry = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
        xml = (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult><Credentials>"
            f"<AccessKeyId>{key.access_key_id}</AccessKeyId>"
            f"<SecretAccessKey>{key.secret_access_key}</SecretAccessKey>"
            f"<SessionToken>{key.session_token}</SessionToken>"
            f"<Expiration>{expiry}</Expiration></Credentials>"
            f"<SubjectFromWebIdentityToken>system:serviceaccount:studio:executor"
            "</SubjectFromWebIdentityToken>"
            f"<AssumedRoleUser><Arn>{self.role_arn}/studio</Arn><AssumedRoleId>AROA:studio"
            "</AssumedRoleId></AssumedRoleUser></AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>req-1</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>")
        return HttpReply(200, xml.encode(), "text/xml")


def _sts_error(status: int, code: str, message: str) -> HttpReply:
    xml = (f'<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error>'
           f"<Type>Sender</Type><Code>{code}</Code><Message>{message}</Message></Error>"
           "<RequestId>req-1</RequestId></ErrorResponse>")
    return HttpReply(status, xml.encode(), "text/xml")


@dataclass
class GoogleTokenEndpoint:
    """Issues access tokens to a service account (JWT assertion) or an authorized user."""

    service_account_email: str | None = None
    public_key: rsa.RSAPublicKey | None = None
    refresh_token: str | None = None
    client_secret: str | None = None
    audience: str | None = None  # the token URI the assertion must name
    # Workload identity federation (an ``external_account`` file): the subject token the STS
    # exchange must carry (e.g. a projected service-account token) and the audience it names.
    subject_token: str | None = None
    federation_audience: str | None = None
    issued: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def answer(self, form: Mapping[str, list[str]]) -> HttpReply:
        grant = (form.get("grant_type") or [""])[0]
        if grant == "urn:ietf:params:oauth:grant-type:jwt-bearer":
            reason = self._check_assertion((form.get("assertion") or [""])[0])
        elif grant == "refresh_token":
            ok = (self.refresh_token is not None
                  and form.get("refresh_token") == [self.refresh_token]
                  and form.get("client_secret") == [self.client_secret])
            reason = None if ok else "wrong refresh token or client secret"
        elif grant == "urn:ietf:params:oauth:grant-type:token-exchange":
            ok = (self.subject_token is not None
                  and form.get("subject_token") == [self.subject_token]
                  and form.get("audience") == [self.federation_audience])
            reason = None if ok else "wrong subject token or audience"
        else:
            reason = f"unsupported grant type {grant!r}"
        if reason is not None:
            self.refused.append(reason)
            body = {"error": "invalid_grant", "error_description": reason}
            return HttpReply(400, json.dumps(body).encode())
        token = "ya29.test-" + secrets.token_urlsafe(24)
        self.issued.append(token)
        body = {"access_token": token, "expires_in": 3599, "token_type": "Bearer",
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}
        return HttpReply(200, json.dumps(body).encode())

    def _check_assertion(self, assertion: str) -> str | None:
        if self.public_key is None:
            return "no service account is known"
        try:
            head, payload, signature = assertion.split(".")
            claims = json.loads(_b64(payload))
            header_fields = json.loads(_b64(head))
            self.public_key.verify(_b64(signature), f"{head}.{payload}".encode(),
                                   padding.PKCS1v15(), hashes.SHA256())
        except (ValueError, binascii.Error, InvalidSignature) as exc:
            return f"bad assertion: {type(exc).__name__}"
        if header_fields.get("alg") != "RS256":
            return "the assertion is not RS256"
        if claims.get("iss") != self.service_account_email:
            return "wrong issuer"
        if self.audience is not None and claims.get("aud") != self.audience:
            return f"wrong audience {claims.get('aud')!r}"
        if not float(claims.get("exp", 0)) > time.time():
            return "expired assertion"
        return None


def _b64(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def new_service_account_key() -> tuple[rsa.RSAPrivateKey, str]:
    """A fresh RSA key and its PKCS#8 PEM (what a service-account JSON file carries)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return key, pem


# ---------------------------------------------------------------- AWS event stream


def event_stream_message(payload: bytes, headers: Mapping[str, str]) -> bytes:
    """One ``application/vnd.amazon.eventstream`` message (string headers, CRC32s)."""
    head = b"".join(
        struct.pack("B", len(name)) + name.encode() + b"\x07" + struct.pack(">H", len(value))
        + value.encode() for name, value in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", binascii.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", binascii.crc32(message))


def bedrock_stream(sse: bytes) -> bytes:
    """The Anthropic SSE events of ``sse`` as Bedrock's ``chunk`` events."""
    frames = []
    for block in sse.decode().split("\n\n"):
        data = [line[len("data: "):] for line in block.splitlines() if line.startswith("data: ")]
        if not data:
            continue
        chunk = {"bytes": base64.b64encode(data[0].encode()).decode()}
        frames.append(event_stream_message(json.dumps(chunk).encode(), {
            ":event-type": "chunk", ":content-type": "application/json",
            ":message-type": "event"}))
    return b"".join(frames)


# ---------------------------------------------------------------- the server


class CloudEndpoints:
    """The server (a context manager that always stops); ``auth`` checks every model request."""

    def __init__(self, auth: Verifier, *, answers: Iterable[str] = (), fallback: str = "done",
                 sts: WebIdentitySts | None = None,
                 google_token: GoogleTokenEndpoint | None = None) -> None:
        self.auth = auth
        self.sts = sts
        self.google_token = google_token
        self._answers: deque[str] = deque(answers)
        self._fallback = fallback
        self._lock = threading.Lock()
        self._ids = 0
        self.requests: list[CloudRequest] = []
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the server is not running")
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def __enter__(self) -> CloudEndpoints:
        self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True,
                                        name="cloud-endpoints")
        self._thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------ reading

    def served(self, route: str) -> list[CloudRequest]:
        """Requests of ``route`` whose auth verified."""
        return [r for r in self.requests if r.route == route and r.refused is None]

    def refusals(self) -> list[tuple[str, str]]:
        return [(r.route, r.refused) for r in self.requests if r.refused is not None]

    # ------------------------------------------------------------ answering

    def answer(self, request: CloudRequest, route: str, model: str | None) -> HttpReply:
        if route == "sts":
            if self.sts is None:
                return HttpReply(404, b"{}")
            return self.sts.answer(parse_qs(request.body.decode(errors="replace")))
        if route == "google_token":
            if self.google_token is None:
                return HttpReply(404, b"{}")
            return self.google_token.answer(parse_qs(request.body.decode(errors="replace")))
        return self._model_reply(request, route, model)

    def _model_reply(self, request: CloudRequest, route: str, model: str | None) -> HttpReply:
        try:
            body: Any = json.loads(request.body) if request.body else {}
        except ValueError:
            body = {}
        vendor, api = {
            "bedrock": ("anthropic", "messages"), "anthropic_aws": ("anthropic", "messages"),
            "vertex_anthropic": ("anthropic", "messages"),
            "vertex_gemini": ("gemini", "generateContent"), "azure_chat": ("openai", "chat"),
            "azure_responses": ("openai", "responses"),
        }[route]
        stream = route == "bedrock" and request.path.endswith("-stream")
        if route == "vertex_anthropic":
            stream = request.path.endswith(":streamRawPredict") or bool(body.get("stream"))
        if stream and isinstance(body, dict):
            body = dict(body, stream=True)
        record = RequestRecord(vendor=vendor, api=api, method=request.method, path=request.path,
                               query=request.query, headers=request.headers,
                               raw_body=request.body, body=body, model=model)
        with self._lock:
            answer = self._answers.popleft() if self._answers else self._fallback
        reply = render(record, text(answer), self._new_id)
        if route == "bedrock" and stream:
            return HttpReply(200, bedrock_stream(reply.body), "application/vnd.amazon.eventstream")
        return reply

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_{self._ids}"


def route_of(method: str, path: str) -> tuple[str, str | None]:
    """``(route, model)`` for a request line."""
    if method != "POST":
        return "unknown", None
    if path == "/":
        return "sts", None
    if path == "/token":
        return "google_token", None
    if (match := _BEDROCK.match(path)) is not None:
        return "bedrock", match["model"]
    if path == "/v1/messages":
        return "anthropic_aws", None
    if (match := _VERTEX.match(path)) is not None:
        vendor = "anthropic" if match["publisher"] == "anthropic" else "gemini"
        return f"vertex_{vendor}", match["model"]
    if (match := _AZURE_DEPLOYMENT.match(path)) is not None:
        return "azure_chat", match["deployment"]
    if path in _AZURE_RESPONSES:
        return "azure_responses", None
    return "unknown", None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler],
                 endpoints: CloudEndpoints) -> None:
        super().__init__(address, handler)
        self.endpoints = endpoints


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:  # noqa: N802 (stdlib naming)
        self._handle()

    def do_GET(self) -> None:  # noqa: N802
        self._handle()

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        route, model = route_of(self.command, url.path)
        endpoints = self.server.endpoints
        request = CloudRequest(route=route, method=self.command, path=url.path, query=url.query,
                               headers={k.lower(): v for k, v in self.headers.items()}, body=raw)
        if route == "unknown":
            reply = HttpReply(404, json.dumps({"error": {"message": "not found"}}).encode())
        elif route in ("sts", "google_token"):
            reply = endpoints.answer(request, route, model)
        else:
            reason = endpoints.auth(request)
            if reason is not None:
                request = CloudRequest(**{**request.__dict__, "refused": reason})
                reply = HttpReply(403, json.dumps({"message": reason}).encode())
            else:
                reply = endpoints.answer(request, route, model)
        with endpoints._lock:
            endpoints.requests.append(request)
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(reply.body)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(reply.body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        return
