"""A small GitHub REST API: stands for ``https://api.github.com`` (GitHub Enterprise's
``/api/v3`` layout), for the endpoints PyGithub calls when the harness opens a pull request.

Served by the stdlib on 127.0.0.1 over the bare repositories of a :class:`GitHttpHost` root (so a
branch "exists" when the real bare repository has it):

* ``GET  /api/v3/repos/{o}/{r}``                     the repository (``default_branch`` from HEAD)
* ``GET  /api/v3/repos/{o}/{r}/branches/{branch}``   404 ``Branch not found`` when missing
* ``GET  /api/v3/repos/{o}/{r}/pulls?head=o:b&state=open``  paginated with ``Link: rel="next"``
* ``POST /api/v3/repos/{o}/{r}/pulls``               422 ``A pull request already exists`` on a
  duplicate open head/base pair
* ``GET  /api/v3/repos/{o}/{r}/pulls/{n}``
* pull-request files, reviews and review comments: :mod:`tests.support.github_reviews`

Every request must carry the token (``Authorization: token X`` or ``Bearer X``), else 401
``Bad credentials``. Every absolute URL in a response is on the server's own host. Responses keep
to the fields PyGithub reads. Tests can queue failures (``fail_next``), force pagination
(``page_size``) and hide existing pull requests from the next listing (``hide_next_listing``, the
race where another process opened the PR between a lookup and the create), and give every reply
the latency of the real service (``latency_s``).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.support.git_http_server import GIT_ENV
from tests.support.github_reviews import PullReviews
from tests.support.github_reviews import route as reviews_route

PREFIX = "/api/v3"
_REPO = re.compile(r"^/api/v3/repos/([^/]+)/([^/]+)(/.*)?$")


@dataclass
class StoredPull:
    number: int
    owner: str
    repo: str
    head: str
    base: str
    title: str
    body: str
    draft: bool
    state: str = "open"


@dataclass
class GitHubApi:
    """The server's state and what it observed."""

    git_root: Path
    token: str
    base_url: str = ""
    pulls: list[StoredPull] = field(default_factory=list)
    requests: list[tuple[str, str]] = field(default_factory=list)
    fail_next: list[int] = field(default_factory=list)
    page_size: int = 30
    hide_next_listing: bool = False
    latency_s: float = 0.0
    reviews: PullReviews = field(default_factory=PullReviews)  # tests.support.github_reviews
    lock: threading.Lock = field(default_factory=threading.Lock)
    # more endpoints, plugged in by other modules of tests/support (github_issues.py): each is
    # asked first, with (method, owner, repo, rest of the path, payload), and answers or None
    extensions: list[Any] = field(default_factory=list)

    @property
    def api_url(self) -> str:
        return f"{self.base_url}{PREFIX}"

    @property
    def posts(self) -> int:
        return sum(1 for method, path in self.requests
                   if method == "POST" and path.split("?")[0].endswith("/pulls"))

    def branch_sha(self, owner: str, repo: str, branch: str) -> str | None:
        bare = self.git_root / owner / f"{repo}.git"
        if not bare.is_dir():
            return None
        found = subprocess.run(
            ["git", f"--git-dir={bare}", "rev-parse", "--verify", "--quiet",
             f"refs/heads/{branch}^{{commit}}"],
            env={**GIT_ENV, "HOME": str(self.git_root)}, capture_output=True, text=True,
            check=False)
        return found.stdout.strip() if found.returncode == 0 else None

    def default_branch(self, owner: str, repo: str) -> str:
        head = (self.git_root / owner / f"{repo}.git" / "HEAD").read_text().strip()
        return head.removeprefix("ref: refs/heads/")

    def add_pull(self, owner: str, repo: str, head: str, base: str, title: str = "existing",
                 body: str = "") -> StoredPull:
        with self.lock:
            pull = StoredPull(len(self.pulls) + 1, owner, repo, head, base, title, body, False)
            self.pulls.append(pull)
            return pull

    # JSON documents -------------------------------------------------------------------------

    def repo_json(self, owner: str, repo: str) -> dict[str, Any]:
        return {"id": abs(hash((owner, repo))) % 10_000_000, "name": repo,
                "full_name": f"{owner}/{repo}", "url": f"{self.api_url}/repos/{owner}/{repo}",
                "html_url": f"{self.base_url}/{owner}/{repo}", "private": True,
                "default_branch": self.default_branch(owner, repo),
                "owner": {"login": owner, "id": 1, "type": "Organization",
                          "url": f"{self.api_url}/users/{owner}"}}

    def pull_json(self, pull: StoredPull) -> dict[str, Any]:
        url = f"{self.api_url}/repos/{pull.owner}/{pull.repo}/pulls/{pull.number}"

        def part(branch: str) -> dict[str, Any]:
            return {"label": f"{pull.owner}:{branch}", "ref": branch,
                    "sha": self.branch_sha(pull.owner, pull.repo, branch) or ""}

        return {"id": 1000 + pull.number, "number": pull.number, "state": pull.state,
                "title": pull.title, "body": pull.body, "draft": pull.draft, "url": url,
                "html_url": f"{self.base_url}/{pull.owner}/{pull.repo}/pull/{pull.number}",
                "head": part(pull.head), "base": part(pull.base)}


Reply = tuple[int, Any, dict[str, str]]


def _error(status: int, message: str, **extra: Any) -> Reply:
    return status, {"message": message, **extra}, {}


class _Routes:
    """The endpoints, on a parsed request."""

    def __init__(self, api: GitHubApi) -> None:
        self.api = api

    def route(self, method: str, path: str, query: dict[str, list[str]],
              payload: dict[str, Any]) -> Reply:
        match = _REPO.match(path)
        if match is None:
            return _error(404, "Not Found")
        owner, repo, rest = match.group(1), match.group(2), match.group(3) or ""
        if not (self.api.git_root / owner / f"{repo}.git").is_dir():
            return _error(404, "Not Found")
        for extension in self.api.extensions:
            answered = extension(method, owner, repo, rest, payload)
            if answered is not None:
                return answered  # type: ignore[no-any-return]
        if method == "GET" and rest == "":
            return 200, self.api.repo_json(owner, repo), {}
        if (reply := reviews_route(self.api, method, owner, repo, rest, payload)) is not None:
            return reply
        if method == "GET" and rest.startswith("/branches/"):
            return self.branch(owner, repo, unquote(rest.removeprefix("/branches/")))
        if method == "GET" and rest == "/pulls":
            return self.list_pulls(owner, repo, path, query)
        if method == "POST" and rest == "/pulls":
            return self.create_pull(owner, repo, payload)
        if method == "GET" and re.fullmatch(r"/pulls/\d+", rest):
            number = int(rest.rsplit("/", 1)[1])
            for pull in self.api.pulls:
                if (pull.owner, pull.repo, pull.number) == (owner, repo, number):
                    return 200, self.api.pull_json(pull), {}
        return _error(404, "Not Found")

    def branch(self, owner: str, repo: str, branch: str) -> Reply:
        sha = self.api.branch_sha(owner, repo, branch)
        if sha is None:
            return _error(404, "Branch not found")
        commit_url = f"{self.api.api_url}/repos/{owner}/{repo}/commits/{sha}"
        return 200, {"name": branch, "protected": False,
                     "commit": {"sha": sha, "url": commit_url}}, {}

    def list_pulls(self, owner: str, repo: str, path: str, query: dict[str, list[str]]) -> Reply:
        state = query.get("state", ["open"])[0]
        head = query.get("head", [None])[0]
        found = [p for p in self.api.pulls if (p.owner, p.repo) == (owner, repo)
                 and (state == "all" or p.state == state)
                 and (head is None or f"{p.owner}:{p.head}" == head)]
        with self.api.lock:
            if self.api.hide_next_listing:
                self.api.hide_next_listing = False
                found = []
        page = int(query.get("page", ["1"])[0])
        size = min(self.api.page_size, int(query.get("per_page", ["30"])[0]))
        chunk = found[(page - 1) * size:page * size]
        headers: dict[str, str] = {}
        if page * size < len(found):
            nxt = {k: v[0] for k, v in query.items()} | {"page": str(page + 1)}
            headers["Link"] = f'<{self.api.base_url}{path}?{urlencode(nxt)}>; rel="next"'
        return 200, [self.api.pull_json(p) for p in chunk], headers

    def create_pull(self, owner: str, repo: str, payload: dict[str, Any]) -> Reply:
        head, base = str(payload.get("head", "")), str(payload.get("base", ""))
        head_branch = head.split(":", 1)[1] if ":" in head else head
        invalid = [name for name, branch in (("base", base), ("head", head_branch))
                   if self.api.branch_sha(owner, repo, branch) is None]
        if invalid:
            return _error(422, "Validation Failed", errors=[
                {"resource": "PullRequest", "field": name, "code": "invalid"} for name in invalid])
        with self.api.lock:
            for pull in self.api.pulls:
                if (pull.owner, pull.repo, pull.head, pull.base, pull.state) == (
                        owner, repo, head_branch, base, "open"):
                    return _error(422, "Validation Failed", errors=[{
                        "resource": "PullRequest", "code": "custom",
                        "message": f"A pull request already exists for {owner}:{head_branch}."}])
            pull = StoredPull(len(self.api.pulls) + 1, owner, repo, head_branch, base,
                              str(payload.get("title", "")), str(payload.get("body") or ""),
                              bool(payload.get("draft", False)))
            self.api.pulls.append(pull)
        return 201, self.api.pull_json(pull), {}


def _handler(api: GitHubApi) -> type[BaseHTTPRequestHandler]:
    routes = _Routes(api)

    class Api(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def _reply(self, status: int, document: Any, headers: dict[str, str]) -> None:
            body = json.dumps(document).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _serve(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            parts = urlsplit(self.path)
            with api.lock:
                api.requests.append((self.command, self.path))
                failure = api.fail_next.pop(0) if api.fail_next else None
            scheme, _, credential = self.headers.get("Authorization", "").partition(" ")
            if scheme.lower() not in ("token", "bearer") or credential != api.token:
                self._reply(*_error(401, "Bad credentials"))
                return
            if failure is not None:
                self._reply(*_error(failure, "Injected failure"))
                return
            payload = json.loads(raw) if raw else {}
            time.sleep(api.latency_s)
            self._reply(*routes.route(self.command, parts.path, parse_qs(parts.query), payload))

        do_GET = _serve
        do_POST = _serve
        do_PATCH = _serve

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
            return

    return Api


@contextmanager
def github_api(git_root: Path, token: str) -> Iterator[GitHubApi]:
    """A running API over the bare repositories ``<git_root>/<owner>/<repo>.git``."""
    api = GitHubApi(git_root=git_root, token=token)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(api))
    server.daemon_threads = True
    api.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
