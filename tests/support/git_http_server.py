"""A git smart-HTTP host: stands for GitHub's git endpoint (``https://github.com/OWNER/REPO.git``).

A threaded stdlib HTTP server on 127.0.0.1 (``TCP_NODELAY``) that runs the real
``git http-backend`` as CGI for the bare repositories under a root directory. Like GitHub it
requires the token (HTTP Basic with the token as password, or ``Bearer``) and answers ``401`` with
``WWW-Authenticate`` otherwise; it sets ``REMOTE_USER`` so pushes are allowed
(``http.receivepack``), accepts chunked request bodies (git sends pushes over 1 MiB chunked),
and measures what it served so tests can assert on it:

* ``requests``: every request (method, path, service, whether it carried credentials);
* ``service_counts``: requests per service (``git-upload-pack`` / ``git-receive-pack``);
* ``pack_bytes_sent``: bytes of upload-pack results sent to clients (what a clone or fetch
  transferred);
* ``pushes``: the ref updates of each receive-pack request, so a test can assert "exactly one
  push of the branch";
* ``chunked_requests``: requests whose body came chunked.

``anonymous_reads=True`` stands for a public repository: clones and fetches need no credential
(pushes still do), while every request's ``Authorization`` header is still recorded.

:func:`redirecting_host` stands for a git host that answers every request with a ``302`` to
another host (to prove the harness neither follows it nor sends the token there).
"""

from __future__ import annotations

import base64
import gzip
import subprocess
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

GIT_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "LANG": "C.UTF-8",
}
UPLOAD_PACK = "git-upload-pack"
RECEIVE_PACK = "git-receive-pack"


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    service: str | None
    authenticated: bool
    authorization: str


@dataclass(frozen=True)
class RefUpdate:
    old: str
    new: str
    ref: str


@dataclass
class GitHttpHost:
    """The server's state: its root, the token it accepts, and what it observed."""

    root: Path
    token: str
    base_url: str = ""
    requests: list[SeenRequest] = field(default_factory=list)
    service_counts: Counter[str] = field(default_factory=Counter)
    pack_bytes_sent: int = 0
    pushes: list[list[RefUpdate]] = field(default_factory=list)
    chunked_requests: int = 0
    anonymous_reads: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def url(self, repo: str) -> str:
        """The clone URL of ``repo`` (``owner/name``) on this host."""
        return f"{self.base_url}/{repo}.git"

    def bare(self, repo: str) -> Path:
        return self.root / f"{repo}.git"

    def pushes_of(self, branch: str) -> list[RefUpdate]:
        ref = f"refs/heads/{branch}"
        return [u for push in self.pushes for u in push if u.ref == ref]

    def authorized(self, header: str) -> bool:
        scheme, _, credential = header.partition(" ")
        if scheme.lower() == "bearer":
            return credential.strip() == self.token
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(credential.strip()).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            return False
        return decoded.partition(":")[2] == self.token


def seed_bare_repo(host_root: Path, repo: str, files: dict[str, bytes | str], *,
                   branch: str = "main", extra_branches: tuple[str, ...] = ()) -> Path:
    """A bare repository ``<root>/<repo>.git`` whose ``branch`` holds ``files`` (one commit)."""
    bare = host_root / f"{repo}.git"
    work = host_root / ".seed" / repo
    work.mkdir(parents=True)
    for name, content in files.items():
        target = work / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    env = {**GIT_ENV, "HOME": str(work), "GIT_AUTHOR_NAME": "Seed",
           "GIT_AUTHOR_EMAIL": "seed@example.invalid", "GIT_COMMITTER_NAME": "Seed",
           "GIT_COMMITTER_EMAIL": "seed@example.invalid"}

    def git(*args: str, cwd: Path = work) -> None:
        subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True)

    git("init", "-q", "-b", branch)
    git("add", ".")
    git("commit", "-q", "-m", "seed")
    for extra in extra_branches:
        git("branch", extra)
    bare.parent.mkdir(parents=True, exist_ok=True)
    git("clone", "-q", "--bare", str(work), str(bare), cwd=host_root)
    return bare


def _service(path: str, query: str) -> str | None:
    for name in (UPLOAD_PACK, RECEIVE_PACK):
        if path.endswith(f"/{name}") or f"service={name}" in query:
            return name
    return None


def parse_ref_updates(body: bytes) -> list[RefUpdate]:
    """The ref updates of a receive-pack request (pkt-lines up to the first flush)."""
    updates: list[RefUpdate] = []
    pos = 0
    while pos + 4 <= len(body):
        length = int(body[pos:pos + 4], 16)
        if length == 0:
            break
        line = body[pos + 4:pos + length].split(b"\0", 1)[0].decode("utf-8", "replace")
        parts = line.strip().split(" ")
        if len(parts) == 3:
            updates.append(RefUpdate(*parts))
        pos += length
    return updates


def _read_body(handler: BaseHTTPRequestHandler) -> bytes:
    if "chunked" in handler.headers.get("Transfer-Encoding", "").lower():
        chunks: list[bytes] = []
        while True:
            size = int(handler.rfile.readline().split(b";")[0].strip(), 16)
            if size == 0:
                while handler.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(chunks)
            chunks.append(handler.rfile.read(size))
            handler.rfile.readline()
    return handler.rfile.read(int(handler.headers.get("Content-Length") or 0))


def _cgi_env(host: GitHttpHost, handler: BaseHTTPRequestHandler, body: bytes) -> dict[str, str]:
    parts = urlsplit(handler.path)
    env = {**GIT_ENV, "HOME": str(host.root), "GIT_PROJECT_ROOT": str(host.root),
           "GIT_HTTP_EXPORT_ALL": "1", "REQUEST_METHOD": handler.command,
           "PATH_INFO": parts.path, "QUERY_STRING": parts.query, "REMOTE_USER": "studio-test",
           "REMOTE_ADDR": "127.0.0.1", "CONTENT_LENGTH": str(len(body)),
           "CONTENT_TYPE": handler.headers.get("Content-Type", "")}
    if handler.headers.get("Content-Encoding"):
        env["HTTP_CONTENT_ENCODING"] = handler.headers["Content-Encoding"]
    if handler.headers.get("Git-Protocol"):
        env["GIT_PROTOCOL"] = handler.headers["Git-Protocol"]
    return env


def _handler(host: GitHttpHost) -> type[BaseHTTPRequestHandler]:
    class SmartHttp(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _send(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            body = _read_body(self) if self.command == "POST" else b""
            if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                with host.lock:
                    host.chunked_requests += 1
            parts = urlsplit(self.path)
            service = _service(parts.path, parts.query)
            authorization = self.headers.get("Authorization", "")
            ok = host.authorized(authorization) or (host.anonymous_reads
                                                    and service == UPLOAD_PACK)
            with host.lock:
                host.requests.append(SeenRequest(self.command, self.path, service, ok,
                                                 authorization))
            if not ok:
                self._send(401, [("WWW-Authenticate", 'Basic realm="git"')], b"Bad credentials\n")
                return
            done = subprocess.run(["git", "http-backend"], input=body, capture_output=True,
                                  env=_cgi_env(host, self, body), check=False)
            status, headers, payload = _parse_cgi(done.stdout)
            self._account(service, parts.path, body, status, payload)
            self._send(status, headers, payload)

        def _account(self, service: str | None, path: str, body: bytes, status: int,
                     payload: bytes) -> None:
            with host.lock:
                if service is not None:
                    host.service_counts[service] += 1
                if status == 200 and self.command == "POST" and path.endswith(UPLOAD_PACK):
                    host.pack_bytes_sent += len(payload)
                if status == 200 and self.command == "POST" and path.endswith(RECEIVE_PACK):
                    raw = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else body
                    updates = parse_ref_updates(raw)
                    if updates:  # git probes a large push first with an empty request
                        host.pushes.append(updates)

        do_GET = _serve
        do_POST = _serve

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            return

    return SmartHttp


def _parse_cgi(output: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
    head, _, payload = output.partition(b"\r\n\r\n")
    if not _:
        head, _, payload = output.partition(b"\n\n")
    status, headers = 200, []
    for line in head.decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split(" ")[0])
        elif name:
            headers.append((name.strip(), value.strip()))
    return status, headers, payload


@contextmanager
def _serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@contextmanager
def git_http_server(root: Path, token: str, *,
                    anonymous_reads: bool = False) -> Iterator[GitHttpHost]:
    """A running smart-HTTP host serving the bare repositories under ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    host = GitHttpHost(root=root, token=token, anonymous_reads=anonymous_reads)
    with _serving(_handler(host)) as base_url:
        host.base_url = base_url
        yield host


@dataclass
class RedirectingHost:
    """A host that answers every request with a redirect to ``target`` (same path)."""

    target: str
    base_url: str = ""
    requests: list[SeenRequest] = field(default_factory=list)


@contextmanager
def redirecting_host(target: str) -> Iterator[RedirectingHost]:
    """A running host that redirects every request (302) to ``target`` + the request path."""
    host = RedirectingHost(target=target.rstrip("/"))

    class Redirect(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _redirect(self) -> None:
            if self.command == "POST":
                _read_body(self)
            auth = self.headers.get("Authorization", "")
            host.requests.append(SeenRequest(self.command, self.path, None, bool(auth), auth))
            self.send_response(302)
            self.send_header("Location", f"{host.target}{self.path}")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = _redirect
        do_POST = _redirect

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            return

    with _serving(Redirect) as base_url:
        host.base_url = base_url
        yield host

