"""A PEP 503 "simple" package index on 127.0.0.1: stands for PyPI (or a company's index) that
setup commands install from, which cannot be reached from the test machine.

:func:`build_wheel` writes a real pure-Python wheel (zip with ``.dist-info`` ``METADATA``,
``WHEEL`` and a ``RECORD`` with hashes, as pip checks); :func:`package_index` serves a directory
of wheels at ``/simple/<project>/`` with ``Cache-Control`` so that pip's HTTP cache may keep
them. ``bytes_served`` counts what the server wrote (bodies), ``requests`` the paths asked.
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def build_wheel(directory: Path, name: str, version: str, files: dict[str, bytes]) -> Path:
    """A ``py3-none-any`` wheel of ``files`` (paths inside the wheel) in ``directory``."""
    dist = f"{name.replace('-', '_')}-{version}"
    info = f"{dist}.dist-info"
    contents = dict(files)
    contents[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\n"
                                    f"Version: {version}\n").encode()
    contents[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: studio-tests\n"
                                 b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for path, data in contents.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    contents[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in contents.items():
            archive.writestr(path, data)
    return wheel


@dataclass
class PackageIndex:
    port: int
    wheels: Path
    requests: list[str] = field(default_factory=list)
    bytes_served: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/simple/"


@contextmanager
def package_index(wheels: Path) -> Iterator[PackageIndex]:
    """Serve the wheels in ``wheels`` until the block ends."""
    state = PackageIndex(0, wheels)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600")
            self.end_headers()
            self.wfile.write(body)
            with lock:
                state.bytes_served += len(body)

        def do_GET(self) -> None:
            with lock:
                state.requests.append(self.path)
            parts = [p for p in self.path.split("?")[0].split("/") if p]
            if parts[:1] == ["simple"] and len(parts) == 2:
                project = _normalize(parts[1])
                links = [f'<a href="/files/{html.escape(w.name)}">{html.escape(w.name)}</a>'
                         for w in sorted(wheels.glob("*.whl"))
                         if _normalize(w.name.split("-")[0]) == project]
                if links:
                    page = "<!DOCTYPE html><html><body>" + "".join(links) + "</body></html>"
                    self._send(200, page.encode(), "text/html")
                    return
            if parts[:1] == ["files"] and len(parts) == 2:
                wheel = wheels / parts[1]
                if wheel.parent == wheels and wheel.is_file():
                    self._send(200, wheel.read_bytes(), "application/octet-stream")
                    return
            self._send(404, b"not found", "text/plain")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
