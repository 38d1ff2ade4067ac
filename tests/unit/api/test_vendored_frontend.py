"""The vendored front-end files are the pinned ones: each listed in ``frontend/VENDORED.sha256``
with its hash, each version pinned exactly with an integrity hash in the lockfile, each with its
licence next to it; and the pages load nothing from another origin."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
STATIC = ROOT / "app" / "backend" / "src" / "services" / "api" / "static"


def test_every_vendored_file_has_its_recorded_hash() -> None:
    lines = (ROOT / "frontend" / "VENDORED.sha256").read_text().splitlines()
    assert len(lines) == 5
    for line in lines:
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((ROOT / name).read_bytes()).hexdigest() == digest, name


def test_the_lockfile_pins_exact_versions_with_integrity() -> None:
    manifest = json.loads((ROOT / "frontend" / "package.json").read_text())
    lock = json.loads((ROOT / "frontend" / "package-lock.json").read_text())
    for name, version in manifest["dependencies"].items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), name
        entry = lock["packages"][f"node_modules/{name}"]
        assert entry["version"] == version and entry["integrity"].startswith("sha512-")
    assert (STATIC / "vendor" / "LICENSE-dagre.txt").read_text().startswith("Copyright")
    assert "Mozilla Public License" in (
        ROOT / "tests" / "support" / "vendor" / "LICENSE-axe-core.txt").read_text()


def test_the_pages_load_scripts_only_from_their_own_origin_and_use_no_html_parsing() -> None:
    index = (STATIC / "index.html").read_text()
    sources = re.findall(r'<script([^>]*)>', index)
    assert sources and all(re.fullmatch(r' src="/static/[a-z_/.]+"', s) for s in sources)
    assert "http" not in index.replace("http-equiv", "")
    for script in STATIC.glob("*.js"):
        code = script.read_text()
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(",
                     "new Function"):
            assert sink not in code, (script.name, sink)
